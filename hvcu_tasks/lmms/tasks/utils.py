"""Hooks named by the HVCU-Bench task YAMLs; the logic lives in the installed `hvcu_tasks` package."""

from hvcu_tasks.core.aggregate import AGGREGATIONS, CIRCULAR_AGGREGATIONS, overall_score_group
from hvcu_tasks.lmms import analysis_tasks as analysis
from hvcu_tasks.lmms import context
from hvcu_tasks.lmms.hooks import (
    doc_to_messages,
    doc_to_text,
    doc_to_visual,
    process_docs,
    process_results,
)

__all__ = [
    "doc_to_messages",
    "doc_to_text",
    "doc_to_visual",
    "overall_score_group",
    "process_docs",
    "process_results",
]

context_doc_to_messages = context.doc_to_messages
context_doc_to_text = context.doc_to_text
context_process_docs = context.process_docs
context_process_results = context.process_results

agg_acc_bridge = AGGREGATIONS["acc_bridge"]
agg_acc_bridge_official = AGGREGATIONS["acc_bridge_official"]
agg_acc_conn = AGGREGATIONS["acc_conn"]
agg_acc_conn_official = AGGREGATIONS["acc_conn_official"]
agg_acc_full = AGGREGATIONS["acc_full"]
agg_acc_full_official = AGGREGATIONS["acc_full_official"]
agg_acc_perc = AGGREGATIONS["acc_perc"]
agg_acc_perc_official = AGGREGATIONS["acc_perc_official"]
agg_error_share_bridge = AGGREGATIONS["error_share_bridge"]
agg_error_share_conn = AGGREGATIONS["error_share_conn"]
agg_error_share_perc = AGGREGATIONS["error_share_perc"]
agg_errors_at_bridge = AGGREGATIONS["errors_at_bridge"]
agg_errors_at_conn = AGGREGATIONS["errors_at_conn"]
agg_errors_at_perc = AGGREGATIONS["errors_at_perc"]
agg_full_affection = AGGREGATIONS["full_affection"]
agg_full_anger = AGGREGATIONS["full_anger"]
agg_full_color = AGGREGATIONS["full_color"]
agg_full_composition = AGGREGATIONS["full_composition"]
agg_full_contrast = AGGREGATIONS["full_contrast"]
agg_full_dislocation = AGGREGATIONS["full_dislocation"]
agg_full_exaggeration = AGGREGATIONS["full_exaggeration"]
agg_full_fear = AGGREGATIONS["full_fear"]
agg_full_font = AGGREGATIONS["full_font"]
agg_full_graphics = AGGREGATIONS["full_graphics"]
agg_full_joy = AGGREGATIONS["full_joy"]
agg_full_metaphor = AGGREGATIONS["full_metaphor"]
agg_full_sadness = AGGREGATIONS["full_sadness"]
agg_full_symbolism = AGGREGATIONS["full_symbolism"]
agg_full_wonder = AGGREGATIONS["full_wonder"]
agg_gold_share_A = AGGREGATIONS["gold_share_A"]
agg_gold_share_B = AGGREGATIONS["gold_share_B"]
agg_gold_share_C = AGGREGATIONS["gold_share_C"]
agg_gold_share_D = AGGREGATIONS["gold_share_D"]
agg_invalid_bridge = AGGREGATIONS["invalid_bridge"]
agg_invalid_conn = AGGREGATIONS["invalid_conn"]
agg_invalid_perc = AGGREGATIONS["invalid_perc"]
agg_n_chains = AGGREGATIONS["n_chains"]
agg_n_failed_requests = AGGREGATIONS["n_failed_requests"]
agg_n_incomplete = AGGREGATIONS["n_incomplete"]
agg_position_bias = AGGREGATIONS["position_bias"]
agg_pred_share_A = AGGREGATIONS["pred_share_A"]
agg_pred_share_B = AGGREGATIONS["pred_share_B"]
agg_pred_share_C = AGGREGATIONS["pred_share_C"]
agg_pred_share_D = AGGREGATIONS["pred_share_D"]
agg_wrong_bridge_after_right = AGGREGATIONS["wrong_bridge_after_right"]
agg_wrong_bridge_after_wrong = AGGREGATIONS["wrong_bridge_after_wrong"]
agg_wrong_conn_after_right = AGGREGATIONS["wrong_conn_after_right"]
agg_wrong_conn_after_wrong = AGGREGATIONS["wrong_conn_after_wrong"]

blind_doc_to_messages = analysis.blind_doc_to_messages
blind_doc_to_visual = analysis.blind_doc_to_visual
circular_process_docs = analysis.circular_process_docs
circular_process_results = analysis.circular_process_results
gold_doc_to_messages = analysis.gold_doc_to_messages
gold_doc_to_text = analysis.gold_doc_to_text
gold_process_docs = analysis.gold_process_docs
gold_process_results = analysis.gold_process_results

agg_circular_acc_bridge = CIRCULAR_AGGREGATIONS["acc_bridge"]
agg_circular_acc_bridge_official = CIRCULAR_AGGREGATIONS["acc_bridge_official"]
agg_circular_acc_conn = CIRCULAR_AGGREGATIONS["acc_conn"]
agg_circular_acc_conn_official = CIRCULAR_AGGREGATIONS["acc_conn_official"]
agg_circular_acc_full = CIRCULAR_AGGREGATIONS["acc_full"]
agg_circular_acc_full_official = CIRCULAR_AGGREGATIONS["acc_full_official"]
agg_circular_acc_perc = CIRCULAR_AGGREGATIONS["acc_perc"]
agg_circular_acc_perc_official = CIRCULAR_AGGREGATIONS["acc_perc_official"]
agg_circular_gold_share_A = CIRCULAR_AGGREGATIONS["gold_share_A"]
agg_circular_gold_share_B = CIRCULAR_AGGREGATIONS["gold_share_B"]
agg_circular_gold_share_C = CIRCULAR_AGGREGATIONS["gold_share_C"]
agg_circular_gold_share_D = CIRCULAR_AGGREGATIONS["gold_share_D"]
agg_circular_invalid_bridge = CIRCULAR_AGGREGATIONS["invalid_bridge"]
agg_circular_invalid_conn = CIRCULAR_AGGREGATIONS["invalid_conn"]
agg_circular_invalid_perc = CIRCULAR_AGGREGATIONS["invalid_perc"]
agg_circular_n_chains = CIRCULAR_AGGREGATIONS["n_chains"]
agg_circular_n_failed_requests = CIRCULAR_AGGREGATIONS["n_failed_requests"]
agg_circular_n_incomplete = CIRCULAR_AGGREGATIONS["n_incomplete"]
agg_circular_plain_acc_bridge = CIRCULAR_AGGREGATIONS["plain_acc_bridge"]
agg_circular_plain_acc_conn = CIRCULAR_AGGREGATIONS["plain_acc_conn"]
agg_circular_plain_acc_perc = CIRCULAR_AGGREGATIONS["plain_acc_perc"]
agg_circular_position_bias = CIRCULAR_AGGREGATIONS["position_bias"]
agg_circular_pred_share_A = CIRCULAR_AGGREGATIONS["pred_share_A"]
agg_circular_pred_share_B = CIRCULAR_AGGREGATIONS["pred_share_B"]
agg_circular_pred_share_C = CIRCULAR_AGGREGATIONS["pred_share_C"]
agg_circular_pred_share_D = CIRCULAR_AGGREGATIONS["pred_share_D"]
