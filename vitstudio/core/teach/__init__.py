"""Teach: Teachable Machine's loop on any ViT. A project on disk (project.py), its features once per sample
through the folder-embedding cache and a head refitted on them (session.py, heads.py, split.py), and an export whose
artefacts are run on every sample and proven to predict what the app did (export.py). No Qt."""
