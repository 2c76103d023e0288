"""What the New-session dialog knows of targets: each target text resolved as the CLI would, this host's CPU,
whether LLVM knows an mattr feature and the CPU names it knows, found out in workers, once per process, and
kept here.

Resolving a target needs LLVM's host detection and the CUDA probe (TVM), so the GUI thread never does it:
it asks (:func:`ask`), a worker answers into this cache, and `answered` (of :func:`facts`) tells the
dialog to look again. An answer is the fact, or the message saying why there is none (a TargetError from
resolve_target is an answer like any other: a typed target this host refuses stays refused). The main
window asks :data:`DETECTED` as it starts, so a dialog normally opens with them known.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from PySide6.QtCore import QObject, Signal

from tunelab.app.workers.engine import CallWorker, describe_error, keep_alive
from tunelab.core.usecases.targets import HostCPU, TargetInfo


class Question(NamedTuple):
    """One thing to find out: "target" (``text`` resolved as the CLI would, ``elsewhere`` for an RPC
    tracker's servers), "host" (this machine's CPU), "feature" (``text``, LLVM's feature, for ``arch``) or
    "cpus" (the CPU names LLVM knows for ``arch``)."""

    kind: str
    text: str = ""
    elsewhere: bool = False
    arch: str = ""


# A str: why there is no fact (the error's message).
Answer = TargetInfo | HostCPU | bool | tuple[str, ...] | str

HOST = Question("host")


def target_question(text: str, elsewhere: bool = False) -> Question:
    # A choice ("auto", "llvm", "cuda") means this machine's target wherever kernels run: only a JSON
    # target is built for another machine's (resolve_target), so a choice is one question either way.
    return Question("target", text, elsewhere and text.strip().startswith("{"))


def feature_question(feature: str, arch: str) -> Question:
    return Question("feature", feature, arch=arch)


def cpu_names_question(arch: str) -> Question:
    return Question("cpus", arch=arch)


# What the dialog shows before anything is typed: this CPU, and the targets auto, llvm and cuda mean here.
DETECTED = (HOST, target_question("auto"), target_question("llvm"), target_question("cuda"))

# Every answer a worker has given in this process. Workers write it (a dict item is set atomically), so
# a question answered is known here before its `answered` signal reaches the GUI thread.
_answers: dict[Question, Answer] = {}
_asking: set[Question] = set()  # asked of a worker still running (GUI thread only)


def _answer(question: Question) -> Answer:
    """One question answered; an error is its message. In a worker (TVM)."""
    from tunelab.core.usecases.targets import host_cpu, is_known_feature, llvm_cpu_names, resolve_target

    try:
        if question.kind == "host":
            return host_cpu()
        if question.kind == "feature":
            return is_known_feature(question.text, question.arch)
        if question.kind == "cpus":
            return tuple(llvm_cpu_names(question.arch))
        return resolve_target(question.text, elsewhere=question.elsewhere)
    except Exception as exc:  # noqa: BLE001 - an answer the dialog shows, never a dialog left waiting
        return describe_error(exc)[0]


def find_out(questions: tuple[Question, ...]) -> tuple[Question, ...]:
    """Answer each question not answered yet, into this module's cache; the questions. In a worker."""
    for question in questions:
        if question not in _answers:
            _answers[question] = _answer(question)
    return questions


class FactsWorker(CallWorker):
    """Finds out `questions` in a thread (:func:`find_out`); `succeeded` carries them."""

    def __init__(self, questions: tuple[Question, ...], parent: QObject | None = None) -> None:
        super().__init__(None, find_out, questions, parent=parent)
        self.questions = questions


class TargetFacts(QObject):
    """`answered` once a worker's answers are in the cache (whoever waits for one looks again)."""

    answered = Signal()

    def follow(self, worker: FactsWorker) -> None:
        """`worker`'s questions are being asked: not again meanwhile; `answered` when it ends."""
        _asking.update(worker.questions)
        worker.succeeded.connect(self._on_found)
        worker.failed.connect(self._on_failed)

    def _on_found(self, questions: tuple[Question, ...]) -> None:
        _asking.difference_update(questions)
        self.answered.emit()

    def _on_failed(self, message: str, _details: str) -> None:
        # Only before find_out ran (TVM could not be imported): every question gets that message.
        worker = self.sender()
        if isinstance(worker, FactsWorker):
            _asking.difference_update(worker.questions)
            for question in worker.questions:
                _answers.setdefault(question, message)
        self.answered.emit()


_facts: TargetFacts | None = None


def facts() -> TargetFacts:
    """The one TargetFacts of this process (made on the GUI thread, on first use)."""
    global _facts
    if _facts is None:
        _facts = TargetFacts()
    return _facts


def known(question: Question) -> Answer | None:
    """The answer, or None while no worker has given it."""
    return _answers.get(question)


def ask(questions: Iterable[Question]) -> None:
    """Ask a worker the questions neither answered nor being asked (all of them in one worker)."""
    wanted = tuple(dict.fromkeys(q for q in questions if q not in _answers and q not in _asking))
    if not wanted:
        return
    worker = FactsWorker(wanted)
    facts().follow(worker)
    keep_alive(worker).start()


def known_or_ask(question: Question) -> Answer | None:
    """The answer; None, with the question asked, while there is none yet."""
    answer = known(question)
    if answer is None:
        ask((question,))
    return answer


def known_target(text: str, elsewhere: bool = False) -> TargetInfo | str | None:
    """``text`` resolved as the CLI would, its error's message, or None (asked) while not known yet."""
    answer = known_or_ask(target_question(text, elsewhere))
    return answer if isinstance(answer, TargetInfo | str) else None


def known_host() -> HostCPU | str | None:
    """This machine's CPU, why it cannot be read, or None (asked) while not known yet."""
    answer = known_or_ask(HOST)
    return answer if isinstance(answer, HostCPU | str) else None


def known_feature(feature: str, arch: str) -> bool | None:
    """Whether LLVM knows the mattr feature for ``arch``; None (asked) while not known yet. A feature
    LLVM could not be asked about counts as known: resolving the target then says what is wrong."""
    answer = known_or_ask(feature_question(feature, arch))
    if answer is None:
        return None
    return answer if isinstance(answer, bool) else True


def known_cpu_names(arch: str) -> tuple[str, ...] | None:
    """The CPU names LLVM knows for ``arch`` (none where LLVM could not be asked: the -mcpu field takes any
    name, and resolving the target says what is wrong); None (asked) while not known yet."""
    answer = known_or_ask(cpu_names_question(arch))
    if answer is None:
        return None
    return answer if isinstance(answer, tuple) else ()
