"""``structq chat``: a conversation, where follow-up questions see the earlier ones."""

from structq.errors import describe

from .common import console, errors_to_exit, make_agent, parse_today, parse_vars, shared_options

HELP = """Commands: /plan (the last plan), /sql (the queries that ran), /reset (forget the conversation),
/help, /quit. Anything else is a question; follow-ups may refer to earlier answers."""


@shared_options
def chat(*, manifests, llm, var, today, adaptive, verbose) -> None:
    """Ask questions in a row; follow-ups ("那他上个月的项目呢？") resolve against earlier answers.

    Example:  structq chat --llm openai:gpt-4o-mini
    """
    from rich.markup import escape

    from structq.errors import StructqError

    from .render import print_answer, print_plan, print_queries

    variables = parse_vars(var)
    day = parse_today(today)
    out = console()
    _enable_history()
    with errors_to_exit(verbose):  # manifests and sources; errors in the loop are shown and survived
        agent = make_agent(manifests, llm, adaptive=adaptive)
    with agent:
        conversation = agent.conversation()
        last = None
        out.print(HELP)
        while True:
            try:
                line = input("structq> ").strip()
            except (EOFError, KeyboardInterrupt):
                out.print()
                return
            if not line:
                continue
            if line in ("/quit", "/exit"):
                return
            if line == "/help":
                out.print(HELP)
            elif line == "/reset":
                conversation.reset()
                out.print("conversation forgotten")
            elif line in ("/plan", "/sql"):
                if last is None:
                    out.print("no question asked yet")
                elif line == "/plan":
                    print_plan(out, last.plan)
                else:
                    print_queries(out, last.results)
            elif line.startswith("/"):
                out.print(f"unknown command {escape(line)}; {HELP}")
            else:
                try:
                    last = conversation.ask(line, vars=variables, today=day)
                except StructqError as exc:
                    message, hint = describe(exc)
                    out.print(f"[red]error:[/] {escape(message)}" + (f"\n  hint: {escape(hint)}" if hint else ""))
                    if verbose:
                        out.print_exception()
                    continue
                print_answer(out, last)


def _enable_history() -> None:
    """Line editing and history with readline where the platform has it."""
    try:
        import readline  # noqa: F401
    except ImportError:
        pass
