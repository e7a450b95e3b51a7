"""Concepts: a sparse autoencoder (SAE) on the patch tokens of one block, learned from a folder.

`settings` (what a run takes: one schema for the CLI's options and the panel's form), `tokens` (the tokens of a
block, cached on disk per model and layer), `sae` (the TopK SAE and its file), `training` (the SAE's training as a
generator: R², L0 and dead concepts as it goes, cancel and resume), `stats` (each concept's top patches, how often it
fires, its classes), `learn` (the whole run, as the CLI and the panel start it), `intervene` (a concept switched off
or scaled inside the model; the class logit attributed to concepts) and `maps` (the registry's "concept" entry).
"""
