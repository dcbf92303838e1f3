"""`rmqsim explain`: a finished run's records read again (its trace, or a replay) and judged.

- source.py   where the records come from (trace or replay) and the run directory's files
- collect.py  the collector that keeps what the question needs
- facts.py, reasons.py, judge.py  a message's facts, the rules that name its causes, the judgement
- fault.py    `--fault K`: what one fault did
- answer.py   the answer to one question (`explain_result`), as text or JSON
"""
