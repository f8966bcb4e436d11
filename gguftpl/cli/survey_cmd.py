"""``gguftpl survey --author ORG…``: audit every GGUF repo of a publisher on the Hub, one row per repo.

parse -> survey (library) -> format (the survey formats' registry) -> write -> exit code.
"""

from __future__ import annotations

import click

from gguftpl.cli.output import StderrProgress, echo, echo_json_text, output_width, width_option
from gguftpl.report.survey import survey_format_names


@click.command("survey")
@click.option(
    "--author",
    "authors",
    multiple=True,
    metavar="ORG",
    help="Survey this user's or organisation's GGUF repos. Repeatable.",
)
@click.option(
    "--search", metavar="TEXT", help="Survey the GGUF repos whose name matches TEXT (with --author: theirs only)."
)
@click.option(
    "--repos",
    "repos_file",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Survey the repos listed in FILE, one ORG/REPO[@REV] per line (# comments).",
)
@click.option("--limit", type=click.IntRange(1), metavar="N", help="Survey at most N repos.")
@click.option("--all-files", is_flag=True, help="Read every GGUF of each repo, not one per quant family.")
@click.option(
    "--state",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Keep the survey's state in this SQLite file: an interrupted survey resumes where it stopped, and a "
    "second run audits again only the repos whose commit changed.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(survey_format_names()),
    default="text",
    show_default=True,
    help="Report format: text for people, json for scripts, csv for a spreadsheet, html for a self-contained page "
    "to look at (with -o survey.html): the repo x runtime matrix, each finding with its fix, the files audited.",
)
@click.option("-j", "--jobs", type=click.IntRange(1, 32), default=4, show_default=True, help="Repos read at once.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report to FILE (atomically).")
@click.option(
    "--fail-on",
    type=click.Choice(["error", "warning", "info"]),
    default="error",
    show_default=True,
    help="Exit 1 when a repo has a finding at or above this severity (or could not be audited).",
)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when repos have findings (2 still means an error).")
@click.option("--no-cache", is_flag=True, help="Analyse every template afresh instead of reusing the facts cache.")
@width_option
@click.pass_context
def command(
    ctx: click.Context,
    authors: tuple[str, ...],
    search: str | None,
    repos_file: str | None,
    limit: int | None,
    all_files: bool,
    state: str | None,
    fmt: str,
    jobs: int,
    output: str | None,
    fail_on: str,
    exit_zero: bool,
    no_cache: bool,
) -> None:
    """Survey a publisher's GGUF repos on the Hugging Face Hub.

    Lists the repos (the Hub's model listing, gguf filter), reads one GGUF per quant family of each from its
    header alone (--all-files: every GGUF), and prints one row per repo: the runtimes that lose the tools, the
    top findings and the fix. HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE apply; each remote operation and each
    repo has the deadline GGUFTPL_REMOTE_TIMEOUT (seconds).

    \b
    Exit status:
      0  no repo with a finding at or above --fail-on
      1  a repo with such findings, or one that could not be audited
      2  usage error, no repo found, the listing failed (no network, a hostile answer)
    """
    from gguftpl.audit import AuditOptions
    from gguftpl.auditcache import AnalysisCache
    from gguftpl.hubsurvey import survey
    from gguftpl.report import write_atomic
    from gguftpl.report.survey import get_survey_formatter

    if not authors and not search and not repos_file:
        raise click.UsageError("give --author ORG, --search TEXT or --repos FILE", ctx=ctx)
    if repos_file and (authors or search):
        raise click.UsageError("--repos FILE takes no --author or --search", ctx=ctx)
    if output:
        from gguftpl.safeio import check_output_folder

        check_output_folder(output)
    formatter = get_survey_formatter(fmt, **({"width": output_width()} if fmt == "text" else {}))
    with StderrProgress("survey", unit="repo") as progress:
        result = survey(
            authors=authors,
            search=search,
            repos_file=repos_file,
            limit=limit,
            all_files=all_files,
            state=state,
            jobs=jobs,
            options=AuditOptions(),
            cache=AnalysisCache() if no_cache else AnalysisCache.on_disk(),
            progress=progress,
        )
    report = formatter.format(result)
    if output is not None:
        write_atomic(output, report)
    elif fmt == "json":
        echo_json_text(report, nl=False)
    elif fmt == "csv":
        from gguftpl.safeio import terminal_text

        click.echo(terminal_text(report), nl=False)
    else:
        echo(report, nl=False)
    ctx.exit(result.exit_code(fail_on, exit_zero=exit_zero))
