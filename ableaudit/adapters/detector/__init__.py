"""The LoRA detector: a small encoder with a peft LoRA, trained on the contrastive
judge's verdicts (and human labels), that predicts interpret, stereotype, framing and
abstain for every (neutral, disability) pair far faster than the judge.

data.py      training examples from the warehouse, split by query group
model.py     the network (encoder + LoRA + four heads), saving and loading
train.py     training, held-out validation, registration
infer.py     batched scoring with a status per pair (the detector_verdicts mart)
registry.py  raw.adapters: every trained adapter (detector or DPO), versioned
"""
