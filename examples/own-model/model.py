"""A model of your own: a small CNN for the shapes dataset (make_data.py), as a user writes it.

The project's contract (functions/models.py): `build(input_shape, classes)` returns a
torch.nn.Module giving one score per class; `loss(outputs, labels)` is optional (default:
cross-entropy). Sharding, the parameter server, checkpoints and re-invocation are the project's.
"""

from torch import nn


def build(input_shape: tuple[int, ...], classes: int) -> nn.Module:
    channels = input_shape[0]
    return nn.Sequential(
        nn.Conv2d(channels, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, classes),
    )


def loss(outputs, labels):  # type: ignore[no-untyped-def]
    # label smoothing: the kind of choice that is the user's, not the framework's
    return nn.functional.cross_entropy(outputs, labels, label_smoothing=0.05)
