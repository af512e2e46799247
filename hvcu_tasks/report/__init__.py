"""`hvcu report`: paper-format tables from lmms-eval run folders, beside the paper's reference rows."""
