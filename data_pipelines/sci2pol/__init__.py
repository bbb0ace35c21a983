"""Sci2Pol: the Sci2Pol-Bench runner (18 tasks) and a citation-linked paper/brief pair miner.

Paper: "Sci2Pol: Evaluating and Fine-tuning LLMs on Scientific-to-Policy Brief Generation", Weimin Wu,
Alexander C. Furnas, Eddie Yang, Gefei Liu, Akhil Pandey Akella, Xuefeng Song, Dashun Wang, Han Liu (2025,
arXiv 2509.21493). Reimplemented from the paper's description; no code or prompt text is copied.
"""
