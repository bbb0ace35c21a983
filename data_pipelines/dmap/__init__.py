"""DMAP: a distribution map for text (Kempton et al., ICLR 2026). See ``core`` for the math."""

from data_pipelines.dmap.core import (
    chi2_uniform,
    dmap_intervals,
    dmap_samples,
    terrell_scott_bins,
    weighted_histogram,
)

__all__ = ["chi2_uniform", "dmap_intervals", "dmap_samples", "terrell_scott_bins", "weighted_histogram"]
