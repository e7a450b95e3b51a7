"""ViT Studio: predict, explain and fine-tune Vision Transformers."""

__version__ = "0.1.0"
