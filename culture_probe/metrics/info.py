"""What the thin `evaluate` modules share: their `MetricInfo` and the BibTeX of the papers they implement."""

from __future__ import annotations

import datasets
import evaluate

CITATIONS: dict[str, str] = {
    "dlama": """@inproceedings{keleg-magdy-2023-dlama,
  title = {{DLAMA}: A Framework for Curating Culturally Diverse Facts for Probing the Knowledge of Pretrained
           Language Models},
  author = {Keleg, Amr and Magdy, Walid},
  booktitle = {Findings of the Association for Computational Linguistics: ACL 2023},
  year = {2023}
}""",
    "fmlama": """@article{zhou-etal-2024-mapo-tofu,
  title = {Does Mapo Tofu Contain Coffee? Probing {LLM}s for Food-related Cultural Knowledge},
  author = {Zhou, Li and Karidi, Taelin and Garneau, Nicolas and Cao, Yong and Liu, Wanlong and Chen, Wenyu
            and Hershcovich, Daniel},
  journal = {arXiv preprint},
  year = {2024}
}""",
    "camel": """@inproceedings{naous-etal-2024-beer,
  title = {Having Beer after Prayer? Measuring Cultural Bias in Large Language Models},
  author = {Naous, Tarek and Ryan, Michael J. and Ritter, Alan and Xu, Wei},
  booktitle = {Proceedings of ACL 2024},
  year = {2024}
}""",
    "xfakt": """@article{aggarwal-etal-2025-xfakt,
  title = {Language Models' Factuality Depends on the Language of Inquiry},
  author = {Aggarwal, Tushar and Tanmay, Kumar and Agrawal, Ayush and Ayush, Kumar and Palangi, Hamid
            and Liang, Paul Pu},
  journal = {arXiv preprint},
  year = {2025}
}""",
    "maps": """@inproceedings{liu-etal-2024-multilingual,
  title = {Are Multilingual {LLM}s Culturally-Diverse Reasoners? An Investigation into Multicultural Proverbs
           and Sayings},
  author = {Liu, Chen Cecilia and Koto, Fajri and Baldwin, Timothy and Gurevych, Iryna},
  booktitle = {Proceedings of NAACL 2024},
  year = {2024}
}""",
    "rankc": """@inproceedings{qi-etal-2023-cross,
  title = {Cross-Lingual Consistency of Factual Knowledge in Multilingual Language Models},
  author = {Qi, Jirui and Fern{\\'a}ndez, Raquel and Bisazza, Arianna},
  booktitle = {Proceedings of EMNLP 2023},
  pages = {10650--10666},
  year = {2023}
}""",
    "culture_probe": """@software{culture_probe,
  title = {culture\\_probe: probing what language models know about cultures},
  year = {2026}
}""",
}


def metric_info(doc: str, paper: str, features: datasets.Features | list[datasets.Features]) -> evaluate.MetricInfo:
    """The `_info` of a module: its docstring (first paragraph as description), the paper's BibTeX, inputs."""
    return evaluate.MetricInfo(
        description=doc.strip().split("\n\n")[0],
        citation=CITATIONS[paper],
        inputs_description=doc,
        features=features,
    )
