"""DESIGNER: design-logic-guided synthesis of multidisciplinary reasoning questions.

Liu, Zhao, ..., Zheng, "DESIGNER: Design-Logic-Guided Multidisciplinary Data Synthesis for LLM Reasoning"
(2025). ``run.py`` is the command (``posttrain data designer``); ``stages.py`` the LLM stages,
``sampling.py`` / ``logic_dedup.py`` / ``filtering.py`` the whole-dataset steps, ``mermaid.py`` the
flowchart validator, ``structured.py`` the JSON-output validation with bounded retries, ``builtin.py``
the embedded question bank and source texts.
"""
