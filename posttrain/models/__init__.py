"""Model loading, likelihoods, and the embedded tiny-model factory."""
