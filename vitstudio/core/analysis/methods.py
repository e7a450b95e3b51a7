"""Names of the analyses, importable without torch (the CLI builds its parser from them)."""

EXPLAIN_METHODS = ("heads", "token", "rollout", "gradient-rollout", "distance", "pca", "similarity", "pos-embed",
                   "filters")
IMAGE_FREE_METHODS = ("pos-embed", "filters")  # analyses of the model alone
FUSIONS = ("mean", "max", "min")
