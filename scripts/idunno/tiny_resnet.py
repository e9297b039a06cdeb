"""A tiny stand-in for ResNet-50 in the experiment's smoke run (scripts/idunno-experiment.sh
--smoke; tiny_work.py): building it takes 0.3 s of sleep and some hashing; a query hashes
each input 100 000 times and answers a class of 1000."""

import tiny_work

SEED = tiny_work.build("resnet", 0.3)


def classify(paths):
    return tiny_work.classify(SEED, 100_000, 1000, paths)
