"""The human baseline of the paper (§4): one group of annotators per level, answer sheets, scoring.

Each level (L1 perception, L2 bridge, L3 connotation) is answered by its own group of annotators, and
no annotator is in two groups, so nobody sees two levels of the same sample (the paper's 'base'
setting). `assign` deals the groups, `sheets` writes each annotator a sheet holding only their
level's questions, `answers` imports the filled sheets and `score` scores them; `results` writes an
lmms-eval results file so that `hvcu report` shows a "Human" row.

Virtual annotators. A full chain needs one answer per level from three different people. Virtual
annotator k is the k-th member of each level's group (group order as in `assignment.json`): their
answers form one complete set of chains, scored like a model. Every metric is computed per virtual
annotator and then averaged over them, so a level's accuracy is the mean accuracy of that level's
annotators (what the paper reports), and Acc_full and the Overall Score are the mean over the
virtual annotators. Error attribution counts (errors_at_*) are totals over the virtual annotators
and their shares are pooled over the same totals.
"""
