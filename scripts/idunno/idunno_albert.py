"""ALBERT-base over text files (one sentence each), as a psrs inference runner function
(the second model of the IDunno experiment, scripts/idunno-experiment.sh). Built when
the runner imports this module (once per job) from the `transformers` package's
`AlbertConfig` with random weights, nothing downloaded. `AlbertConfig()`'s defaults are
ALBERT-xxlarge (hidden size 4096); ALBERT-base's sizes are set here (hidden 768, 12
heads, intermediate 3072), the rest (vocabulary 30000, embeddings 128, 12 layers)
left at the defaults. Words become token ids by a hash (no tokenizer to download);
`classify(paths)` answers each sentence's class (of 2) and its probability."""

import zlib

import torch
from transformers import AlbertConfig, AlbertForSequenceClassification

torch.manual_seed(0)
CONFIG = AlbertConfig(hidden_size=768, num_attention_heads=12, intermediate_size=3072)
MODEL = AlbertForSequenceClassification(CONFIG).eval()
CLS, SEP, PAD, FIRST = 2, 3, 0, 5


def tokens(text):
    words = text.lower().split()
    return [CLS] + [FIRST + zlib.crc32(w.encode()) % (CONFIG.vocab_size - FIRST) for w in words] + [SEP]


def classify(paths):
    ids = [tokens(open(p, encoding="utf-8").read()) for p in paths]
    n = max(len(t) for t in ids)
    x = torch.tensor([t + [PAD] * (n - len(t)) for t in ids])
    mask = torch.tensor([[1] * len(t) + [0] * (n - len(t)) for t in ids])
    with torch.inference_mode():
        p = torch.softmax(MODEL(input_ids=x, attention_mask=mask).logits, dim=1)
    best = p.max(dim=1)
    return [[int(c), float(v)] for c, v in zip(best.indices, best.values)]
