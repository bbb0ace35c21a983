"""Built-in tasks, the dataset task, prompt encoding, and task/reward loading."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from posttrain.config import TrainConfig
from posttrain.models.tiny import build_tokenizer
from posttrain.tasks import TASKS, load_reward, load_task, reward_columns
from posttrain.tasks.arithmetic import ArithmeticTask
from posttrain.tasks.base import Example
from posttrain.tasks.countdown import CountdownTask, check_solution, evaluate_expression, problem_from_answer
from posttrain.tasks.dataset import DatasetError, DatasetTask
from posttrain.tasks.prompts import encode_prompts
from posttrain.tasks.sudoku import (
    SudokuTask,
    all_solutions,
    blank_cell_accuracy,
    is_solution,
    score_grid,
    valid_units,
)

BUILT_IN = ["arithmetic", "countdown", "sudoku"]


@pytest.mark.parametrize("name", BUILT_IN)
def test_splits_deterministic_disjoint_and_self_consistent(name: str) -> None:
    first, second = TASKS.get(name)(), TASKS.get(name)()
    train, test = first.split("train"), first.split("test")
    assert train == second.split("train") and test == second.split("test")
    assert len(test) == 256 and len(train) > 500
    assert not {e.prompt for e in train} & {e.prompt for e in test}
    sample = test[:20]
    columns = reward_columns(sample)
    assert first.reward([e.prompt for e in sample], [e.answer for e in sample], **columns) == [1.0] * 20
    assert all(first.is_correct(e.answer, e) for e in sample)
    with pytest.raises(ValueError, match="validation"):
        first.split("validation")


def test_arithmetic_reward_hand_made() -> None:
    task = ArithmeticTask()
    completions = ["30", " 30 ", "31", "the answer is 30", "", "3o"]
    assert task.reward(["23+7="] * 6, completions, answer=["30"] * 6) == [1.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    assert task.is_correct("-5", Example(prompt="2-7=", answer="-5"))


def test_countdown_evaluator_hand_made() -> None:
    assert evaluate_expression("3*(6-1)") == (15, [3, 6, 1])
    assert evaluate_expression("7/2") == (pytest.approx(3.5), [7, 2])
    assert evaluate_expression("1/(2-2)") is None
    assert problem_from_answer("3*5+7") == ([3, 5, 7], 22)
    assert check_solution("3*5+7", [7, 5, 3], 22)
    assert check_solution("(7+5)*3-14=22", [7, 5, 3, 14], 22)
    assert check_solution("5*3+7", [3, 5, 7], 22)
    assert check_solution("8/4*2", [2, 4, 8], 4)
    assert not check_solution("3*5+7", [3, 5, 7], 23)
    assert not check_solution("7+7+8", [3, 5, 7], 22)  # uses 7 twice and 8 not given
    assert not check_solution("22", [3, 5, 7], 22)


@pytest.mark.parametrize("text", [
    "__import__('os').system('echo hi')", "open('x')", "x+1", "-3+25", "2**10", "3 5", "(3", "lambda: 1",
    "[1,2]", "3.5*2", "1" * 100, "9" * 70, "\x00", "", "2;3",
])
def test_countdown_rejects_unsafe_or_invalid(text: str) -> None:
    assert evaluate_expression(text) is None
    assert not check_solution(text, [3, 5, 7, 25, 1, 2, 10], 22)


def test_countdown_reward_hand_made() -> None:
    task = CountdownTask()
    rewards = task.reward(["1,6,3->15"] * 4, ["3*(6-1)", "(6-1)*3", "6+6+3", "import os"],
                          answer=["3*(6-1)"] * 4)
    assert rewards == [1.0, 1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="reference answer"):
        task.reward(["?"], ["1"], answer=["1/0"])


def test_sudoku_validity_hand_made() -> None:
    solution = "1234341221434321"
    assert valid_units(solution) == 12
    assert len(all_solutions()) == 288 and solution in all_solutions()
    puzzle = "1.3.34.2..4.4.21"  # blanks at cells 1, 3, 6, 8, 9, 11, 13
    assert score_grid(solution, puzzle, solution) == 1.0
    assert score_grid("1234 3412\n2143 4321", puzzle, solution) == 1.0
    assert is_solution(solution, puzzle) and not is_solution("123434122143432", puzzle)
    swapped = "2134341221434321"  # breaks a given (cell 0) and blank cell 1 -> 6 of 7 blanks right
    assert not is_solution(swapped, puzzle)
    assert score_grid(swapped, puzzle, solution) == pytest.approx(6 / 7)
    assert score_grid(swapped, puzzle, solution, dense=False) == 0.0
    # swap the last two cells: rows and boxes stay valid, columns 3 and 4 break -> 10/12 valid units
    broken = "1234341221434312"
    assert valid_units(broken) == 10
    assert score_grid(broken, "................", solution, dense=False) == 0.0
    assert score_grid(broken, "................", solution) == pytest.approx(14 / 16)
    # dense reward, by hand: blanks 1, 3, 6, 8, 9, 11, 13 hold 2, 4, 1, 2, 1, 3, 3; two are wrong here
    wrong_two = "1434341231434321"  # cell 1 -> 4 and cell 8 -> 3
    assert blank_cell_accuracy(wrong_two, puzzle, solution) == pytest.approx(5 / 7)
    assert blank_cell_accuracy("12", puzzle, solution) == pytest.approx(1 / 7)  # short: missing cells are wrong


def test_sudoku_reward_needs_puzzle_and_accepts_any_valid_solution() -> None:
    task = SudokuTask()
    # swapping the 1s and 2s of rows 1 and 3 (columns 1-2) keeps the grid valid: two solutions
    puzzle = "..343412..434321"
    grids = ["1234341221434321", "2134341212434321"]
    assert all(valid_units(g) == 12 for g in grids)
    assert task.reward([puzzle] * 2, grids, answer=[grids[0]] * 2, puzzle=[puzzle] * 2) == [1.0, 1.0]
    with pytest.raises(KeyError, match="puzzle"):
        task.reward([puzzle], grids[:1], answer=grids[:1])
    with pytest.raises(KeyError, match="answer"):
        task.reward([puzzle], grids[:1], puzzle=[puzzle])


def test_sudoku_distractor_swaps_ones_and_twos_in_blanks_only() -> None:
    task = SudokuTask()
    example = task.split("train")[0]
    wrong = task.distractor(example)
    puzzle, answer = example.columns["puzzle"], example.answer
    for p, a, w in zip(puzzle, answer, wrong):
        assert w == (a if p != "." else {"1": "2", "2": "1"}.get(a, a))
    assert task.distractor(type(example)(prompt="1.3.34.2..4.4.21", answer="1234341221434321",
                                         columns={"puzzle": "1.3.34.2..4.4.21"})) == "1134342212434321"


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_dataset_jsonl_holds_out_seeded_fraction(tmp_path: Path) -> None:
    rows = [json.dumps({"prompt": f"{i}+1=", "answer": i + 1, "source": "t"}) for i in range(20)]
    path = _write(tmp_path / "d.jsonl", rows[:10] + [""] + rows[10:])
    task = DatasetTask(str(path), test_fraction=0.25, seed=3)
    train, test = task.split("train"), task.split("test")
    assert len(test) == 5 and len(train) == 15
    assert not {e.prompt for e in train} & {e.prompt for e in test}
    assert test == DatasetTask(str(path), test_fraction=0.25, seed=3).split("test")
    assert test != DatasetTask(str(path), test_fraction=0.25, seed=4).split("test")
    assert train[0].answer == str(int(train[0].prompt.split("+")[0]) + 1) and train[0].columns == {"source": "t"}
    assert task.reward(["1+1="] * 2, ["2", "3"], answer=["2", "2"]) == [1.0, 0.0]


@pytest.mark.parametrize(("line", "message"), [
    ('{"prompt": "1+1=", ', "line 2: invalid JSON"),
    ('{"answer": "2"}', "line 2: missing prompt field 'prompt'"),
    ('{"prompt": "1+1="}', "line 2: missing answer field 'answer'"),
    ('{"prompt": 7, "answer": "2"}', "line 2: prompt field 'prompt' must be a non-empty string"),
    ('{"prompt": "1+1=", "answer": [2]}', "line 2: answer field 'answer' must be a string or number"),
    ('["1+1=", "2"]', "line 2: expected a JSON object"),
])
def test_dataset_malformed_rows_name_file_row_field(tmp_path: Path, line: str, message: str) -> None:
    path = _write(tmp_path / "bad.jsonl", ['{"prompt": "0+1=", "answer": "1"}', line])
    with pytest.raises(DatasetError) as info:
        DatasetTask(str(path))
    assert str(path) in str(info.value) and message in str(info.value)


def test_dataset_custom_columns_and_hf_test_split(tmp_path: Path) -> None:
    data = tmp_path / "hf"
    data.mkdir()
    _write(data / "train.jsonl", [json.dumps({"q": f"{i}*2=", "a": str(2 * i)}) for i in range(6)])
    _write(data / "test.jsonl", [json.dumps({"q": "9*2=", "a": "18"})])
    task = DatasetTask(str(data), prompt_column="q", answer_column="a")
    assert [e.prompt for e in task.split("test")] == ["9*2="] and len(task.split("train")) == 6


def test_load_task_from_config(tmp_path: Path) -> None:
    assert isinstance(load_task(TrainConfig(task="countdown")), CountdownTask)
    path = _write(tmp_path / "d.jsonl", [json.dumps({"x": f"{i}", "y": f"{i}"}) for i in range(10)])
    task = load_task(TrainConfig(task="dataset", dataset=str(path), prompt_column="x", answer_column="y"))
    assert len(task.split("test")) == 1
    with pytest.raises(KeyError, match="unknown task 'chess'"):
        load_task(TrainConfig(task="chess"))


def test_load_reward(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = ArithmeticTask()
    assert load_reward(None, task) == task.reward
    (tmp_path / "my_rewards.py").write_text(
        "def length_reward(prompts, completions, **columns):\n    return [float(len(c)) for c in completions]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fn = load_reward("my_rewards:length_reward", task)
    assert fn(["p"], ["abc"], answer=["1"]) == [3.0]
    assert load_reward(f"{tmp_path / 'my_rewards.py'}:length_reward", task)(["p"], ["ab"]) == [2.0]
    with pytest.raises(ImportError, match="no_such_module_xyz"):
        load_reward("no_such_module_xyz:fn", task)
    with pytest.raises(ImportError, match="no callable 'missing'"):
        load_reward("my_rewards:missing", task)
    with pytest.raises(ValueError, match="module:function"):
        load_reward("just_a_name", task)
    sys.modules.pop("my_rewards", None)


def test_encode_prompts_tiny_tokenizer() -> None:
    tok = build_tokenizer()
    examples = [Example(prompt="1+1=", answer="2"), Example(prompt="12+7=", answer="19")]
    ids = encode_prompts(tok, examples, None, 16)
    assert tok.decode(ids[0]) == "<bos><|user|>1+1=<|assistant|>"
    assert len(ids[1]) == 3 + len("12+7=")
    with_system = encode_prompts(tok, examples[:1], "hi", 16)
    assert tok.decode(with_system[0]) == "<bos><|system|>hi<|user|>1+1=<|assistant|>"
    with pytest.raises(ValueError, match="example 1 is 8 tokens, over max_prompt_tokens=7"):
        encode_prompts(tok, examples, None, 7)


def test_encode_prompts_without_chat_template(caplog: pytest.LogCaptureFixture) -> None:
    tok = build_tokenizer()
    tok.chat_template = None
    ids = encode_prompts(tok, [Example(prompt="1+1=", answer="2")], "sys", 32)
    assert tok.decode(ids[0]) == "sys\n\n1+1="
