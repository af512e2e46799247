"""Controlled aesthetic perturbations: colour and composition on any raster, font and graphics on layered designs.

Modules: `design` (the layered-design JSON format), `fonts` (font files), `render` and `textures` (drawing a
design with PIL), `raster` (colour and composition operations on images), `variants` (seeded parameter
sampling and application, one factor per variant), `run` (writing variants and their manifest) and `cli`
(the `hvcu perturb` subcommand).
"""
