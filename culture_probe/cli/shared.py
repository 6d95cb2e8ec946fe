"""What the commands' parser modules share: the examples that `--help` ends with, the parser class
(every flag given twice with two values is refused, not settled by keeping the last), and the type
of the subparsers they add to. Nothing here imports a command's work, so that building the parser
stays light.
"""

from __future__ import annotations

import argparse
from typing import Any, TypeAlias

from culture_probe.util.arguments import StoreOnce

# argparse's generic at type-checking time only, a plain class at run time: hence the string
Subparsers: TypeAlias = "argparse._SubParsersAction[Parser]"


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose flags that store one value (all but switches and repeatable ones
    such as --option) refuse a second, different value (`StoreOnce`); its sub-parsers are of this
    class too.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in (None, "store"):  # argparse's own default action, by either of its names
            self.register("action", name, StoreOnce)


EXAMPLES = """examples:
  culture-probe list
  culture-probe run dlama_arab_west --model bert-base-multilingual-cased --out runs/mbert
  culture-probe run dlama fmlama_en camel_co_prompts --model bert-base-multilingual-cased --out runs/suite
  culture-probe run xfakt_factual_recall --model planted:xfakt_factual_recall --option judge=string --out runs/planted
  culture-probe run camel_co_prompts --model planted:camel_co_prompts --limit smoke --out runs/smoke
  culture-probe run camel_co_prompts,camel_ag_prompts --model-args pretrained=UBC-NLP/ARBERT --limit 0.1 --out runs/a
  culture-probe run fmlama_en --model gpt2 --shard 2/4 --out shards/2   (then: culture-probe merge shards/* --out run)
  culture-probe report runs/mbert
  culture-probe compare runs/mbert runs/xlmr
  culture-probe consistency runs/mbert_en runs/mbert_ar --out runs/consistency
  culture-probe board runs/mbert runs/xlmr runs/suite --out board
  culture-probe push-board my-org/culture-results runs/suite --dry-run --out space
  culture-probe export hub_folder --configs dlama_arab_west camel_entities
  culture-probe push my-org/culture_probe --configs camel_co_prompts camel_entities
  culture-probe push-metrics my-org --dry-run --out metric_spaces
  culture-probe curate dlama --region arab --contrast west --languages ar,en --out my_dlama
"""
