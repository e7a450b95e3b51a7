"""Dense tasks from a ViT's patch features, with no training.

`settings` (defaults and vocabulary, torch-free), `painted` (painted masks: one PNG of class indices per image, 255
not painted; per-patch class shares on the model's crop), `retrieval` (the memory bank and open-hummingbird-eval's
k-NN voting; capping the bank), `segment` (a folder segmented from a few painted images, masks written per image),
`export` (the masks as COCO RLE and a table of class shares) and `matching` (a point of one image found in another:
similarity maps, best, refined and mutual matches, in the token, key or query facet).
"""
