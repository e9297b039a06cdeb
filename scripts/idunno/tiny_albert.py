"""A tiny stand-in for ALBERT in the experiment's smoke run (scripts/idunno-experiment.sh
--smoke; tiny_work.py): building it takes 0.5 s of sleep and some hashing; a query hashes
each sentence 60 000 times and answers a class of 2."""

import tiny_work

SEED = tiny_work.build("albert", 0.5)


def classify(paths):
    return tiny_work.classify(SEED, 60_000, 2, paths)
