"""Analyses of a loaded model: attention capture and maps, embeddings, model-intrinsic views, rendering, export."""
