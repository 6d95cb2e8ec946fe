"""One planted model's training in a process of its own: `python -m
culture_probe.models.train_process STAGING` trains the spec `train_planted` left in STAGING and
saves the model there, on the one code path `culture_probe.models.planted.TRAINING_ENV` sets before
torch loads.
"""

import sys

from culture_probe.models.planted import train_staged

if __name__ == "__main__":
    train_staged(sys.argv[1])
