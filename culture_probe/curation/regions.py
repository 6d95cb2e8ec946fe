"""Regions: the sets of countries that stand for a culture (DLAMA paper section 4 and Table F8).

A region selects facts through the SPARQL variable `?country`, either as a list of country QIDs (one
query per country, as upstream's grouped queries do) or as a graph pattern over `?country` (the Arab
region is "member of the Arab League", `?country wdt:P463 wd:Q7172`). Each country names the
Wikipedia sites whose article sizes rank its subjects (Table F8); a subject's size is its largest
article on the sites of the countries that selected it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from culture_probe.errors import CultureProbeError, UnknownNameError
from culture_probe.util.keyvalue import split_pair

QID = re.compile(r"^Q[1-9][0-9]*$")


@dataclass(frozen=True)
class Region:
    """A culture as a set of countries.

    `name` names output folders (`arab` -> `arab-west/`); `token` names files
    (`P17_general_ARAB_REGION.jsonl`). `countries` are QIDs; `condition` (optional) is a SPARQL
    pattern over `?country` used instead of the list. `sites` maps a country QID to its Wikipedia
    language codes; countries not listed use `default_sites`.
    """

    name: str
    token: str
    countries: tuple[str, ...] = ()
    condition: str | None = None
    sites: tuple[tuple[str, tuple[str, ...]], ...] = ()
    default_sites: tuple[str, ...] = ("en",)
    description: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        bad = [q for q in self.countries if not QID.match(q)]
        if bad:
            raise CultureProbeError(
                f"Region {self.name!r} has country ids that are not Wikidata QIDs: {bad}. "
                "Give countries as QIDs such as 'Q79' (Egypt)."
            )
        if not self.countries and not self.condition:
            raise CultureProbeError(
                f"Region {self.name!r} selects nothing: give `countries` (QIDs) or a SPARQL `condition` on ?country."
            )
        if self.condition is not None and "?country" not in self.condition:
            raise CultureProbeError(
                f"The condition of region {self.name!r} must constrain ?country, got {self.condition!r}. "
                "Example: '?country wdt:P463 wd:Q7172 .' (member of the Arab League)."
            )

    def sites_for(self, country: str) -> tuple[str, ...]:
        """The Wikipedia language codes whose articles rank subjects selected through `country`."""
        return dict(self.sites).get(country, self.default_sites)

    def all_sites(self) -> tuple[str, ...]:
        """Every Wikipedia language code any country of the region uses, sorted."""
        return tuple(
            sorted({s for _, codes in self.sites for s in codes} | set(self.default_sites))
        )


def _sites(table: dict[str, str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple((qid, tuple(codes.split(","))) for qid, codes in table.items())


# The 22 members of the Arab League; the query uses the membership condition, the list documents it.
ARAB_LEAGUE = (
    "Q262",
    "Q398",
    "Q970",
    "Q977",
    "Q79",
    "Q796",
    "Q810",
    "Q817",
    "Q822",
    "Q1016",
    "Q1025",
    "Q1028",
    "Q842",
    "Q219060",
    "Q846",
    "Q851",
    "Q1045",
    "Q1049",
    "Q858",
    "Q948",
    "Q878",
    "Q805",
)
# Table F8, Western cultures: country -> Wikipedia sites.
WEST_SITES = {
    "Q408": "en",
    "Q16": "en,fr",
    "Q664": "en,mi",
    "Q30": "en",
    "Q228": "ca,en",
    "Q38": "it,en",
    "Q347": "de,en",
    "Q235": "fr,en",
    "Q45": "pt,en",
    "Q238": "it,en",
    "Q29": "es,en",
    "Q40": "de,en",
    "Q31": "de,fr,nl,en",
    "Q142": "fr,en",
    "Q183": "de,en",
    "Q27": "ga,en",
    "Q32": "lb,fr,de,en",
    "Q55": "nl,en",
    "Q39": "de,fr,it,rm,en",
    "Q145": "en",
}
# Table F8, Asian cultures (13 East and South-East Asian countries).
ASIA_SITES = {
    "Q148": "zh,en",
    "Q252": "id,en",
    "Q17": "ja,en",
    "Q833": "ms,en",
    "Q711": "zh,en",
    "Q836": "my,en",
    "Q423": "ko,en",
    "Q928": "en",
    "Q334": "ms,en",
    "Q884": "ko,en",
    "Q865": "zh,en",
    "Q869": "th,en",
    "Q881": "vi,en",
}
# Table F8, South American cultures (12 countries).
SOUTH_AMERICA_SITES = {
    "Q414": "es,en",
    "Q750": "es,en",
    "Q155": "pt,en",
    "Q298": "es,en",
    "Q739": "es,en",
    "Q736": "es,en",
    "Q734": "en",
    "Q733": "es,en",
    "Q419": "es,en",
    "Q730": "nl,en",
    "Q77": "es,en",
    "Q717": "es,en",
}

REGIONS: dict[str, Region] = {
    "arab": Region(
        "arab",
        "ARAB_REGION",
        ARAB_LEAGUE,
        condition="?country wdt:P463 wd:Q7172 .",
        default_sites=("ar", "en", "fr"),
        description="the 22 members of the Arab League",
    ),
    "west": Region(
        "west",
        "WESTERN_COUNTRIES",
        tuple(WEST_SITES),
        sites=_sites(WEST_SITES),
        description="Western Europe (EuroVoc), the USA, Canada, Australia and New Zealand",
    ),
    "asia": Region(
        "asia",
        "ASIA",
        tuple(ASIA_SITES),
        sites=_sites(ASIA_SITES),
        description="13 East and South-East Asian countries",
    ),
    "south_america": Region(
        "south_america",
        "SOUTH_AMERICA",
        tuple(SOUTH_AMERICA_SITES),
        sites=_sites(SOUTH_AMERICA_SITES),
        description="12 South American countries",
    ),
}


def resolve_region(spec: str | Region, *, sites: tuple[str, ...] = ("en",)) -> Region:
    """A built-in region by name (`arab`, `west`, `asia`, `south_america`), or a new one from
    `NAME=Q1,Q2,...`.

    A new region's token is its upper-cased name (`east_africa` -> `EAST_AFRICA`) and every country
    uses `sites`.
    """
    if isinstance(spec, Region):
        return spec
    if "=" in spec:
        name, qids = split_pair(
            spec, what="--region", example="east_africa=Q114,Q1037", shape="NAME=QID,QID,..."
        )
        name = name.lower()
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise CultureProbeError(
                f"Region name {name!r} in {spec!r} must be lower-case letters, digits and '_' "
                "(it names folders and files). Example: --region east_africa=Q114,Q1037"
            )
        countries = tuple(q.strip() for q in qids.split(",") if q.strip())
        return Region(name, name.upper(), countries, default_sites=tuple(sites))
    if spec not in REGIONS:
        raise UnknownNameError(
            "region",
            spec,
            REGIONS,
            fix="Or define one as NAME=QID,QID,... (e.g. east_africa=Q114,Q1037).",
        )
    return REGIONS[spec]
