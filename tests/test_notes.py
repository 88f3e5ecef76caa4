"""A note is printed once per command, however many worker processes run into it."""

from __future__ import annotations

import multiprocessing

from heterosim.notes import once_per_command, print_note


def _worker_prints(text: str) -> None:
    print_note(text)


def test_a_note_from_several_worker_processes_is_printed_once(capfd):
    context = multiprocessing.get_context("spawn")
    with once_per_command():
        workers = [context.Process(target=_worker_prints, args=("GEMMs timed",)) for _ in range(3)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(30)
        print_note("GEMMs timed")
        print_note("another")
    err = capfd.readouterr().err
    assert err.count("heterosim: note: GEMMs timed") == 1 and err.count("note: another") == 1


def test_outside_a_command_every_note_is_printed(capfd):
    print_note("twice")
    print_note("twice")
    assert capfd.readouterr().err.count("heterosim: note: twice") == 2
