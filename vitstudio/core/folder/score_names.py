"""The brain's scores by name (core/folder/scores.py computes them), torch-free: the command line, the Folder tab's
columns, its sort list and its map's colouring all read these."""

from __future__ import annotations

NAMES = ("uniqueness", "representativeness", "hardness", "mistakenness")
ABOUT = {
    "uniqueness": "how far the image is from its 3 nearest others in the model's features (weighted 0.6/0.3/0.1), "
                  "1 = the most unique of the folder (fiftyone-brain's uniqueness)",
    "representativeness": "how far the image is from the centre of its cluster (k-means, 20 clusters), 1 = the "
                          "farthest of its cluster (fiftyone-brain's cluster-center representativeness)",
    "hardness": "the entropy of the model's prediction, in nats: high = the model hesitates between classes",
    "mistakenness": "how likely the folder's label is wrong: above 0.5 the model predicts another class, the more "
                    "confidently the higher (fiftyone-brain's mistakenness with the class folder as the label)",
}
