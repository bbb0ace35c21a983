"""mR3-style rubric reward reasoning: templates, verdict parsing, reward mapping, SFT data, tiny RM."""
