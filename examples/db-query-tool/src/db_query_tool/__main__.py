"""Entry point: `python -m db_query_tool` serves db_query until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio

from crayfish_common.grpc_server import serve
from crayfish_common.logs import configure_logging
from crayfish_common.tool_service import TOOL_SERVICE_NAME, ToolSetServicer
from crayfish_common.tools import ToolSet

from db_query_tool.config import DbQuerySettings
from db_query_tool.query import QueryLimits, QueryRefused, ReadOnlyDatabase
from db_query_tool.tool import DbQueryTool


def build_tools(settings: DbQuerySettings) -> ToolSet:
    limits = QueryLimits(settings.max_rows, settings.timeout, settings.max_cell_chars)
    tool = DbQueryTool(ReadOnlyDatabase(settings.database, limits), settings.max_output_chars)
    return ToolSet([tool], expected=(QueryRefused,))


def main() -> None:
    settings = DbQuerySettings()  # type: ignore[call-arg]  # database comes from the env
    configure_logging("db-query-tool", settings.log_level, settings.log_json)
    servicer = ToolSetServicer(build_tools(settings))
    asyncio.run(serve(settings, [TOOL_SERVICE_NAME], [servicer.register]))


if __name__ == "__main__":
    main()
