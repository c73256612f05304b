"""An import-linter contract type for allow-lists: the modules of a package may import only what is listed
(internal packages, named external packages, and the standard library), directly.

`lint-imports` loads it from pyproject.toml (`contract_types`); the built-in `forbidden` contract can only
list what is not allowed, which for "the pure core imports nothing but ..." would mean every package on
PyPI.
"""

from __future__ import annotations

import sys
from typing import Any

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


class AllowedImportsContract(Contract):
    """Configuration: `source_modules` (packages checked), `allowed_modules` (packages they may import,
    internal or external, besides themselves), `allow_standard_library` (default true)."""

    type_name = "allowed"

    source_modules = fields.ListField(subfield=fields.StringField())
    allowed_modules = fields.ListField(subfield=fields.StringField())
    allow_standard_library = fields.BooleanField(required=False, default=True)

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        sources: list[str] = list(self.source_modules)  # type: ignore[call-overload]
        allowed: list[str] = list(self.allowed_modules)  # type: ignore[call-overload]
        stdlib = str(self.allow_standard_library).lower() == "true"
        refused: list[dict[str, Any]] = []
        for source in sources:
            for importer in sorted(_package_modules(graph, source)):
                for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                    if _within(imported, [source, *allowed]):
                        continue
                    if stdlib and imported.split(".")[0] in sys.stdlib_module_names:
                        continue
                    lines = [
                        d["line_number"]
                        for d in graph.get_import_details(importer=importer, imported=imported)
                    ]
                    refused.append({"importer": importer, "imported": imported, "lines": lines})
        return ContractCheck(kept=not refused, warnings=[], metadata={"refused": refused})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for item in check.metadata["refused"]:
            lines = ", ".join(f"l.{line}" for line in item["lines"])
            output.print_error(f"{item['importer']} -> {item['imported']} ({lines}) is not allowed")


def _package_modules(graph: ImportGraph, package: str) -> set[str]:
    return {package} | set(graph.find_descendants(package))


def _within(module: str, packages: list[str]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)
