"""Human audit of a candidate benchmark in rounds (paper App. B.2): forms, verdicts, agreement, decisions.

`agreement` (Fleiss' kappa, Krippendorff's alpha, majority shares), `verdicts` (records and strict CSV
reading), `review` (flagging rule and round statistics), `forms` (self-contained HTML form and CSV
sheet), `config` (audit.json), `bench` (reading, snapshotting and writing benchmarks in the authors'
layout), `rounds` (the audit folder and its round-by-round life cycle) and `cli` (`hvcu audit ...`).
"""
