"""ResNet-50 over image files, as a psrs inference runner function (the model of the
IDunno experiment, scripts/idunno-experiment.sh). The model is built when the runner
imports this module (once per job): torchvision's ResNet-50 with `weights=None`, random
weights, nothing downloaded. `classify(paths)` answers each image's most likely
ImageNet class and its probability."""

import torch
import torchvision
from PIL import Image
from torchvision.transforms import functional as F

torch.manual_seed(0)
MODEL = torchvision.models.resnet50(weights=None).eval()
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def load(path):
    img = Image.open(path).convert("RGB")
    if img.size != (224, 224):
        img = img.resize((224, 224))
    return F.normalize(F.to_tensor(img), MEAN, STD)


def classify(paths):
    x = torch.stack([load(p) for p in paths])
    with torch.inference_mode():
        p = torch.softmax(MODEL(x), dim=1)
    best = p.max(dim=1)
    return [[int(c), float(v)] for c, v in zip(best.indices, best.values)]
