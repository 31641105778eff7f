"""DPO mitigation (VLM paper 6.2): flagged pairs become preference data
(the preference_pairs mart), exported in TRL's layout (export.py), and a LoRA
adapter is fine-tuned with TRL's DPOTrainer and registered (train.py), ready to
run as an audit arm (``arms: [{name: dpo, adapter: <path>}]``).
"""
