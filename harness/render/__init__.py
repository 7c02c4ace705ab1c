"""Renderers, side by side: each turns results (a Report, a kill matrix, a diff, a class's grades)
into one format. console: rich text for people; junit: JUnit XML; csv: the class's grade sheet;
gradescope: Gradescope's results.json. The JSON report itself is Report.to_json. Renderers return
text or data, or write the one file they are asked for; only the CLI prints."""
