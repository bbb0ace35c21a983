"""The embedded default inputs of ``posttrain data designer``: a small question bank and source texts.

Both are generated from templates with a seeded RNG (same seed, same text). The bank spans four
disciplines, the four DESIGNER difficulty levels and three question types; every question carries its
template's labels as ``gold_discipline`` / ``gold_difficulty`` / ``gold_type``, so the annotation stage's
accuracy can be measured. The source texts are short expository passages per discipline, one of them
repeated with a different wrapper so the MinHash segment filter has a duplicate to remove.
"""

from __future__ import annotations

import random

from posttrain.common.seeds import derive_seed

DISCIPLINES = ("Physics", "Chemistry", "Biology", "Economics")
QUESTION_TYPES = ("multiple-choice", "calculation", "short-answer")

# (discipline, difficulty, type, template); {a}, {b}, {c} are filled with seeded numbers
_TEMPLATES = (
    ("Physics", "Medium", "calculation", "A cart of mass {a} kg accelerates at {b} m/s^2. What net force acts on it?"),
    ("Physics", "Hard", "calculation", ("A ball is thrown upward at {a} m/s from a {b} m tall cliff. Ignoring air "
     "resistance, how long until it hits the ground below?")),
    ("Physics", "Very Hard", "short-answer", ("Explain why a satellite in a circular orbit of radius {a}000 km "
     "must slow down to move to a higher circular orbit after two engine burns, and give the energy change sign.")),
    ("Physics", "Easy", "multiple-choice", ("Which quantity is conserved when a {a} kg skater pulls in her arms? "
     "A) angular momentum B) kinetic energy C) moment of inertia D) angular speed")),
    ("Physics", "Very Hard", "calculation", ("Two capacitors of {a} uF and {b} uF are charged to {c} V and then "
     "connected in parallel with opposite polarity. How much energy is dissipated?")),
    ("Physics", "Hard", "multiple-choice", ("A wire of resistance {a} ohm is stretched to {b} times its length at "
     "constant volume. Its new resistance is: A) {a} ohm B) {b} times C) {b} squared times D) unchanged")),
    ("Chemistry", "Medium", "calculation", "How many moles are in {a} g of water (molar mass 18 g/mol)?"),
    ("Chemistry", "Hard", "short-answer", ("A buffer holds {a} mM acetic acid and {b} mM acetate (pKa 4.76). "
     "Explain how its pH changes when {c} mM of strong acid is added, and compute the new pH.")),
    ("Chemistry", "Very Hard", "calculation", ("At {a}00 K the equilibrium constant of N2 + 3H2 <-> 2NH3 is "
     "{b}e-5. Starting from {c} bar N2 and 3x that of H2, find the ammonia partial pressure at equilibrium.")),
    ("Chemistry", "Easy", "multiple-choice", "Which bond is the most polar? A) C-H B) O-H C) C-C D) H-H"),
    ("Chemistry", "Very Hard", "short-answer", ("Predict the major product when {a}-methylcyclohexanol is heated "
     "with concentrated sulfuric acid and justify it with the carbocation mechanism.")),
    ("Chemistry", "Hard", "calculation", ("A first-order reaction has a half-life of {a} min. What fraction "
     "remains after {b} min?")),
    ("Biology", "Medium", "multiple-choice", ("In a cross of two heterozygous pea plants (Aa x Aa), what fraction "
     "of {a}00 offspring show the recessive trait? A) 1/4 B) 1/2 C) 3/4 D) 0")),
    ("Biology", "Hard", "short-answer", ("A mutation removes the start codon of a gene expressed at {a} copies "
     "per cell. Explain the effect on transcription and on translation.")),
    ("Biology", "Very Hard", "calculation", ("A population of {a}00 is in Hardy-Weinberg equilibrium with {b}% "
     "showing a recessive phenotype. How many heterozygous carriers are expected?")),
    ("Biology", "Easy", "short-answer", "Name the organelle where most ATP is made in a eukaryotic cell."),
    ("Biology", "Very Hard", "short-answer", ("Design an experiment with {a} plants to test whether a hormone "
     "moves from the shoot tip to the roots, naming the controls needed.")),
    ("Biology", "Hard", "calculation", ("Bacteria double every {a} minutes. Starting from {b} cells, how many "
     "are there after {c} hours?")),
    ("Economics", "Medium", "calculation", ("Demand is Q = {a}0 - 2P and supply is Q = {b} + 3P. Find the "
     "equilibrium price.")),
    ("Economics", "Hard", "multiple-choice", ("A price ceiling set {a}% below equilibrium causes: "
     "A) a surplus B) a shortage C) no change D) higher supply")),
    ("Economics", "Very Hard", "calculation", ("A monopolist faces P = {a}0 - Q with marginal cost {b}. Compute "
     "the deadweight loss relative to perfect competition.")),
    ("Economics", "Easy", "short-answer", "What does GDP measure?"),
    ("Economics", "Very Hard", "short-answer", ("Explain how a {a}% tariff on steel can lower total welfare in a "
     "small open economy, naming every area of the welfare triangle.")),
    ("Economics", "Hard", "calculation", ("A bond pays {a} dollars a year forever. At an interest rate of {b}%, "
     "what is its price?")),
)

_PASSAGES = {
    "Physics": ("Newton's second law states that the net force on a body equals its mass times its acceleration. "
                "A {a} kg crate pushed across a floor with friction coefficient 0.{b} needs a force larger than "
                "the friction force before it moves. Energy is conserved in an isolated system: kinetic energy "
                "turns into potential energy as a pendulum rises, and back again as it falls. In circuits, "
                "capacitors store energy as one half C V squared, and charge is conserved when they are joined."),
    "Chemistry": ("Chemical equilibrium is reached when the forward and reverse reaction rates are equal. Le "
                  "Chatelier's principle predicts the shift after a disturbance: adding {a} bar of a reactant "
                  "pushes the reaction forward. Buffers resist pH change because a weak acid and its conjugate "
                  "base consume added hydrogen or hydroxide ions; the Henderson-Hasselbalch equation relates pH "
                  "to pKa and the ratio of base to acid. Reaction rates follow rate laws measured at {b}00 K."),
    "Biology": ("Genes are transcribed into messenger RNA in the nucleus and translated into protein on "
                "ribosomes. Mendel's crosses showed that alleles segregate: two heterozygous parents give "
                "offspring in a 1:2:1 genotype ratio. In a population of {a}00 individuals in Hardy-Weinberg "
                "equilibrium, allele frequencies stay constant without selection, mutation, migration or drift. "
                "Mitochondria make most of the cell's ATP through oxidative phosphorylation."),
    "Economics": ("A market reaches equilibrium where the quantity demanded equals the quantity supplied. A "
                  "price ceiling below the equilibrium price creates a shortage of about {a} percent, while a "
                  "tax drives a wedge between the price buyers pay and the price sellers receive, causing a "
                  "deadweight loss. A monopolist sets marginal revenue equal to marginal cost and charges more "
                  "than a competitive market would; the present value of a perpetuity is payment over rate."),
}


def question_bank(seed: int = 0) -> list[dict]:
    """One question per template (24), numbers drawn from ``random.Random(seed)``; fields ``id``,
    ``question`` and the gold labels."""
    rng = random.Random(seed)
    bank = []
    for n, (discipline, difficulty, qtype, template) in enumerate(_TEMPLATES):
        text = template.format(a=rng.randint(2, 9), b=rng.randint(2, 9), c=rng.randint(2, 9))
        bank.append({"id": f"q{n:03d}", "question": text, "gold_discipline": discipline,
                     "gold_difficulty": difficulty, "gold_type": qtype})
    return bank


def source_texts(seed: int = 0) -> list[dict]:
    """Source documents (``id``, ``text``, ``discipline``): per discipline, the passage twice with different
    numbers; the first Physics passage once more with a one-line preface (a near-duplicate)."""
    rng = random.Random(derive_seed(seed, "source_texts"))
    docs = []
    for discipline in DISCIPLINES:
        for copy in range(2):
            text = _PASSAGES[discipline].format(a=rng.randint(2, 9), b=rng.randint(2, 9))
            docs.append({"id": f"{discipline.lower()}-{copy}", "discipline": discipline, "text": text})
    docs.append({"id": "physics-0-mirror", "discipline": "Physics", "text": "Reprinted notes.\n" + docs[0]["text"]})
    return docs
