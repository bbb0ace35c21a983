"""Methods that run on their own, without the trainer: ``vision`` (AttWarp, DeLeaker, FGA; ``posttrain vision``)
and ``gpo_control`` (GPO in partially observable control; ``posttrain gpo-control``). They use the lower layers
(models, the GPO loss terms, the helpers) and the import-linter contract keeps the trainer out of them.
"""
