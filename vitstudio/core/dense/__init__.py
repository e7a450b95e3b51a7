"""Dense tasks from a ViT's patch features, with no training (issue 52).

`painted` (painted masks: one PNG of class indices per image, 255 not painted; per-patch class shares on the model's
crop), `retrieval` (the memory bank and open-hummingbird-eval's k-NN voting; capping the bank), `segment` (a folder
segmented from a few painted images, masks written per image) and `matching` (a point of one image found in another:
similarity maps, best and mutual matches, in the token, key or query facet).
"""
