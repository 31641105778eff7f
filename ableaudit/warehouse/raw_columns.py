"""The raw layer's building blocks: a column, a table, the Arrow type of each DuckDB type, and the
column every landed row carries (``landing_id``). The tables themselves are declared in
``ableaudit.warehouse.raw_schema``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

_ARROW = {
    "varchar": pa.string(),
    "double": pa.float64(),
    "integer": pa.int32(),
    "bigint": pa.int64(),
    "boolean": pa.bool_(),
    "timestamp": pa.timestamp("us"),
}


@dataclass(frozen=True)
class Column:
    name: str
    """The column's name."""
    type: str
    """Its DuckDB type (a key of the Arrow type map)."""
    doc: str
    """What it holds, for the dbt docs."""
    required: bool = False
    """NOT NULL."""
    default: str | None = None
    """A SQL default; a column with one is filled by DuckDB, not by landing."""
    stamped: bool = False
    """Filled by the landing layer itself (``landing_id``), never by the caller's rows."""

    @property
    def arrow(self) -> pa.DataType:
        return _ARROW[self.type]


@dataclass(frozen=True)
class Table:
    name: str
    """The table under the ``raw`` schema."""
    doc: str
    """What one row is, and who lands it."""
    columns: tuple[Column, ...]
    """In DDL order."""
    primary_key: tuple[str, ...] = ()
    """Empty when the key cannot be a primary key (a nullable part), or when its index
    would cost more than it guards (``UNINDEXED_KEYS``)."""
    tests: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """dbt column tests declared on the source: (column, tests)."""

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)

    def landed(self) -> list[Column]:
        """The columns a caller's rows give (no default, not stamped by the landing layer)."""
        return [c for c in self.columns if c.default is None and not c.stamped]

    def written(self) -> list[Column]:
        """The columns a landing writes: the caller's, and the ones it stamps."""
        return [c for c in self.columns if c.default is None]

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([(c.name, c.arrow) for c in self.written()])

    def arrow_columns(self) -> dict[str, pa.DataType]:
        return {c.name: c.arrow for c in self.written()}

    def ddl(self) -> str:
        lines = []
        for c in self.columns:
            line = f"    {c.name} {c.type}"
            if c.required:
                line += " not null"
            if c.default is not None:
                line += f" default {c.default}"
            lines.append(line)
        if self.primary_key:
            lines.append(f"    primary key ({', '.join(self.primary_key)})")
        return f"create table if not exists raw.{self.name} (\n" + ",\n".join(lines) + "\n);"


def column(
    name: str, type_: str, doc: str, required: bool = False, default: str | None = None
) -> Column:
    return Column(name, type_, doc, required, default)


NOW = "current_timestamp"

LANDING_ID = Column(
    "landing_id",
    "varchar",
    "The landing that wrote the row (raw.landings); `ableaudit forget` removes a landing's rows.",
    stamped=True,
)
