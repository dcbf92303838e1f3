"""Scenario files: spec.py (the scenario tree, its loading and `--set` overrides), validate.py
(checks across sections: errors, exit 2), lint.py and useless_parts.py (valid settings that answer
another question than meant: warnings), reference.py (`rmqsim defaults`), schema.py (`rmqsim
schema`), setup_size.py (how large a set-up would build).
"""
