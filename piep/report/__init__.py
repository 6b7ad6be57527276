"""Reports: hotspot reports (Markdown, HTML, figures) and the tables the commands print.
The command line imports it; it imports core/, plan/ and the apps (api, compare)."""

__all__ = ["hotspot", "table"]
