"""The Folder tab's Concepts side tab: learn (concepts_tab), browse (concept_browser), read one image
(concept_image)."""
