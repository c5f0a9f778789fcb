"""Driving Airflow 3's web UI with Selenium and Debian's chromium + chromium-driver.

``Browser.start()`` opens a headless Chromium (fresh profile); its methods do what a user does:
log in through the simple auth manager's login page, open a DAG, fill and submit the trigger
form, open a run's grid, a (mapped) task instance and its log, clear or mark task instances.

What the UI looks like (Airflow 3.3.2), which the selectors rely on:

* Login (``/auth/login``): ``input[name=username]``, ``input[name=password]``, a submit button;
  the JWT then lives in the ``_token`` cookie.
* DAG page: ``[data-testid=trigger-dag-button]`` opens the trigger dialog, a Chakra/Ark
  ``[data-scope=dialog][data-part=content]`` with ``[data-testid=trigger-dag-submit]``.
* The params form is an accordion ``[data-testid=config-form]``: one item per ``section``
  (trigger ``[data-part=item-trigger]`` whose ``aria-controls`` ends in ``:content:<section>``,
  ``aria-expanded``); params without a section go to "Run Parameters" (the one item open at the
  start), and the last item is "Advanced Options" (``:content:advancedOptions``: Run ID
  ``input[name=dagRunId]``, note, the whole conf as a JSON editor). Only one item is open at a
  time; closed items stay in the DOM (``hidden``).
* Each param is a ``[data-scope=field][data-part=root]`` (``role=group``); its label is the
  param's ``title`` (or name), a required one has ``data-required``. The input is named after
  the param: ``element_<name>``:
  string ``input[name=element_x]``; integer/number an Ark number input
  (``#number-input:element_x`` around ``input[name=element_x]``, min/max from ``minimum`` /
  ``maximum`` only); enum a react-select (``#element_x``, value in ``input[type=hidden]
  [name=element_x]``, ``values_display`` labels shown); array of strings ``textarea
  [name=element_x]`` (one entry per line); array with ``examples`` a multi react-select;
  object a Monaco JSON editor in ``div#element_x``; boolean an Ark switch
  (``label#switch:element_x`` around a checkbox ``input[name=element_x]``); a
  ``format: date-time`` string a popover ``[data-testid=datetime-input]`` (no ``element_`` id)
  with Date ``YYYY/MM/DD`` and Time ``HH:mm`` inputs.
* Client-side checks are few: an empty value of a non-nullable type ("This field is
  required"), invalid JSON, arrays. The message is ``[data-scope=field][data-part=error-text]``
  in the field (the root gets ``data-invalid``), the section title turns red, and the Trigger
  button is disabled. ``minimum``/``maximum`` only clamp the number input when it loses focus
  (0 with ``minimum: 1`` becomes 1, silently); everything else (``exclusiveMinimum``,
  ``minLength``, ``pattern``...) is checked by the server on submit: the dialog stays open
  with ``[data-testid=error-alert]`` ("400 Bad Request / Invalid input for param ...").
* After a successful submit the UI goes to ``/dags/<dag_id>/runs/<run_id>`` (the run id is read
  from there). A UI-triggered run gets a logical date (the form's Logical Date).
* Grid: ``a#grid-<run_id>-<task_id>`` (a mapped task links to ``.../tasks/<task>/mapped``, a
  list with links ``.../mapped/<i>``). Task instance page: the log is a virtualized list
  ``[data-testid=virtualized-list]`` of rows with ``data-index`` (only rows in view are in the
  DOM), grouped (``::group::``) in collapsed groups; ``[data-testid=log-settings-button]`` →
  ``[data-testid=log-settings-expand]`` expands them (not remembered across pages). A row's text
  without its line number (``[data-copy-exclude]``) is "[2026-01-01 00:00:00] INFO - message".
  ``task_log_text`` scrolls the list through and keeps each row once.
* Task instance page: Clear ``[aria-label*='to clear']`` ("Press shift+c to clear") and "Mark
  Task Instance as..." (menu items ``[role=menuitem][data-value=failed|success]``) open a dialog:
  Past/Future/Upstream/Downstream (and "Clear only failed tasks") toggle buttons
  (``button[data-group-item]``; Downstream is pre-selected; which are on shows only in CSS),
  affected tasks ``[data-testid=table-list]`` (cells ``td[data-testid=table-cell-<column>]``),
  a note, and a "Confirm" button.
* Escape in the trigger dialog closes it when no menu/popover is open: the helpers blur instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import urllib.parse
from datetime import datetime
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import (
    ElementClickInterceptedException,
    ElementNotInteractableException,
    NoSuchElementException,
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROME_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1600,1000",
)

DIALOG = "[data-scope=dialog][data-part=content]"
DATETIME_PLACEHOLDER = "Select date and time"  # the English UI's text of an empty date-time param
FIELD_ROOT = "./ancestor-or-self::*[@data-scope='field' and @data-part='root'][1]"


# The screenshots the docs pages show (docs/ui.md): each is taken by a UI test under the same name,
# and `make docs-screenshots` (MYSQLCDC_DOCS_SCREENSHOTS=1) replaces them with that run's.
DOCS_SCREENSHOTS = REPO / "docs" / "ui"


def artifacts_dir() -> Path:
    path = Path(os.environ.get("MYSQLCDC_UI_ARTIFACTS") or REPO / "tests" / "ui" / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


def chrome(user_data_dir: str | os.PathLike) -> webdriver.Chrome:
    """Debian's chromium through Debian's chromedriver (same version; nothing is downloaded)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        raise RuntimeError(
            f"{', '.join(missing)} missing: `make bootstrap` installs the Debian packages chromium and chromium-driver"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in CHROME_ARGS:
        options.add_argument(arg)
    options.add_argument(f"--user-data-dir={user_data_dir}")
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def _gone(element: WebElement) -> bool:
    try:
        return not element.is_displayed()
    except StaleElementReferenceException:
        return True


class TriggerRejected(AssertionError):
    """The trigger dialog showed an error instead of starting a run."""


class Browser:
    def __init__(
        self,
        driver: webdriver.Chrome,
        *,
        artifacts: Path | None = None,
        timeout: float = 20,
        profile_dir: str | None = None,
    ) -> None:
        self.driver = driver
        self.artifacts = artifacts or artifacts_dir()
        self.timeout = timeout
        self.base_url: str | None = None
        self._profile_dir = profile_dir
        self._shots = 0

    @classmethod
    def start(cls, *, artifacts: Path | None = None, timeout: float = 20) -> "Browser":
        profile = tempfile.mkdtemp(prefix="mysqlcdc-chromium-")
        try:
            driver = chrome(profile)
        except BaseException:
            shutil.rmtree(profile, ignore_errors=True)
            raise
        return cls(driver, artifacts=artifacts, timeout=timeout, profile_dir=profile)

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            if self._profile_dir:
                shutil.rmtree(self._profile_dir, ignore_errors=True)

    # ---- basics ------------------------------------------------------------------------

    def wait(self, timeout: float | None = None) -> WebDriverWait:
        return WebDriverWait(
            self.driver,
            self.timeout if timeout is None else timeout,
            poll_frequency=0.1,
            ignored_exceptions=(StaleElementReferenceException,),
        )

    def until(self, condition, timeout: float | None = None, message: str = ""):
        try:
            return self.wait(timeout).until(condition)
        except TimeoutException as e:
            shot = self.screenshot("timeout")
            raise TimeoutException(f"{message or condition} (screenshot {shot}; url {self.driver.current_url})") from e

    def visible(self, css: str, root: Any = None) -> list[WebElement]:
        return [e for e in (root or self.driver).find_elements(By.CSS_SELECTOR, css) if e.is_displayed()]

    def screenshot(self, name: str) -> Path:
        """A PNG of the window in the artifacts dir, numbered in the order taken."""
        self._shots += 1
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
        path = self.artifacts / f"{self._shots:02d}-{safe}.png"
        self.driver.save_screenshot(str(path))
        docs_copy = DOCS_SCREENSHOTS / f"{safe}.png"
        if os.environ.get("MYSQLCDC_DOCS_SCREENSHOTS") == "1" and docs_copy.exists():
            shutil.copyfile(path, docs_copy)  # `make docs-screenshots`: the docs show this run's UI
        return path

    def dump(self, name: str) -> Path:
        """Screenshot plus the page's HTML, for working out selectors or a failure."""
        shot = self.screenshot(name)
        shot.with_suffix(".html").write_text(self.driver.page_source)
        return shot

    def url(self, path: str) -> str:
        assert self.base_url, "log in first"
        return self.base_url + path

    @staticmethod
    def q(s: str) -> str:
        return urllib.parse.quote(s, safe="")

    def click(self, element: WebElement) -> None:
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
        try:
            element.click()
        except ElementClickInterceptedException:  # a toast or tooltip over it
            self.driver.execute_script("arguments[0].click()", element)

    def blur(self) -> None:
        """Leave the focused field, as a user tabbing away (number inputs clamp to min/max then)."""
        self.driver.execute_script("document.activeElement && document.activeElement.blur()")

    # ---- login and navigation ----------------------------------------------------------

    def login(self, base_url: str, user: str, password: str) -> None:
        """Through the simple auth manager's login page."""
        self.base_url = base_url.rstrip("/")
        self.driver.get(self.base_url + "/")
        self.until(
            lambda d: (
                d.find_elements(By.NAME, "username") or d.find_elements(By.CSS_SELECTOR, "[data-testid=nav-sidebar]")
            ),
            message="login page",
        )
        if not self.driver.find_elements(By.NAME, "username"):
            return  # already logged in
        username = self.driver.find_element(By.NAME, "username")
        username.send_keys(user)
        self.driver.find_element(By.NAME, "password").send_keys(password)
        self.driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        self.until(
            lambda d: (
                "/auth/login" not in d.current_url and d.find_elements(By.CSS_SELECTOR, "[data-testid=nav-sidebar]")
            ),
            message="logged in",
        )

    def open_dag(self, dag_id: str) -> None:
        self.driver.get(self.url(f"/dags/{self.q(dag_id)}"))
        self.until(
            EC.element_to_be_clickable((By.CSS_SELECTOR, "[data-testid=trigger-dag-button]")),
            message=f"DAG page of {dag_id}",
        )

    # ---- trigger form ------------------------------------------------------------------

    def dialog(self) -> WebElement:
        dialogs = self.visible(DIALOG)
        if not dialogs:
            raise NoSuchElementException("no dialog open")
        return dialogs[-1]

    def open_trigger_form(self, dag_id: str | None = None) -> WebElement:
        """Opens the DAG page (if ``dag_id``) and the Trigger dialog; returns the dialog."""
        if dag_id is not None:
            self.open_dag(dag_id)
        button = self.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "[data-testid=trigger-dag-button]")))
        self.click(button)
        if button.get_attribute("aria-haspopup") == "menu":  # on run/task pages: Trigger / ...again with config
            item = self.until(lambda d: self.visible("[role=menuitem]"))[0]
            self.click(item)
        self.until(
            lambda d: any(
                e.find_elements(By.CSS_SELECTOR, "[data-testid=trigger-dag-submit]")
                and e.find_elements(By.CSS_SELECTOR, "[data-testid=config-form]")
                for e in self.visible(DIALOG)
            ),
            message="trigger form",
        )
        return self.dialog()

    def sections(self) -> list[dict[str, Any]]:
        """The form's sections in order: ``name`` (its title), ``key`` (the section, or
        ``advancedOptions``), ``expanded``, ``has_error`` (a field in it is invalid)."""
        out = []
        for item in self.dialog().find_elements(
            By.CSS_SELECTOR, "[data-testid=config-form] > [data-scope=accordion][data-part=item]"
        ):
            trigger = item.find_element(By.CSS_SELECTOR, "[data-part=item-trigger]")
            key = trigger.get_attribute("aria-controls").split(":content:", 1)[1]
            content = item.find_element(By.CSS_SELECTOR, "[data-part=item-content]")
            out.append(
                {
                    "name": trigger.text.strip(),
                    "key": key,
                    "expanded": trigger.get_attribute("aria-expanded") == "true",
                    "has_error": bool(
                        content.find_elements(By.CSS_SELECTOR, "[data-scope=field][data-part=root][data-invalid]")
                    ),
                }
            )
        return out

    def open_section(self, name: str) -> WebElement:
        """Expands a section (by its title, or ``advancedOptions``); returns its content."""
        dialog = self.dialog()
        triggers = dialog.find_elements(By.CSS_SELECTOR, "[data-testid=config-form] [data-part=item-trigger]")
        trigger = next(
            (
                t
                for t in triggers
                if t.get_attribute("aria-controls").endswith(f":content:{name}") or t.text.strip() == name
            ),
            None,
        )
        if trigger is None:
            raise NoSuchElementException(f"no section {name!r}; sections: {[s['name'] for s in self.sections()]}")
        content_id = trigger.get_attribute("aria-controls")
        if trigger.get_attribute("aria-expanded") != "true":
            self.click(trigger)
        return self.until(
            lambda d: (lambda c: c if c.is_displayed() else False)(d.find_element(By.ID, content_id)),
            message=f"section {name} open",
        )

    def _field_element(self, name: str) -> WebElement | None:
        css = ", ".join(
            f'[{attr}="{value}"]'
            for attr, value in (
                ("name", f"element_{name}"),
                ("id", f"element_{name}"),
                ("id", f"number-input:element_{name}"),
                ("id", f"switch:element_{name}"),
            )
        )
        found = self.dialog().find_elements(By.CSS_SELECTOR, css)
        return found[0] if found else None

    def field(self, name: str, *, show: bool = True) -> WebElement:
        """The field root of a param, by its name (``element_<name>``) or its title; with
        ``show``, its section is opened and it is scrolled into view."""
        element = self._field_element(name)
        if element is not None:
            root = element.find_element(By.XPATH, FIELD_ROOT)
        else:
            root = None
            for label in self.dialog().find_elements(
                By.CSS_SELECTOR, "[data-testid=config-form] [data-scope=field][data-part=label]"
            ):
                text = (label.get_attribute("textContent") or "").replace("*", "").strip()
                if text == name:
                    root = label.find_element(By.XPATH, FIELD_ROOT)
                    break
            if root is None:
                raise NoSuchElementException(f"no param {name!r} in the trigger form")
        if show and not root.is_displayed():
            content = root.find_element(
                By.XPATH, "./ancestor::*[@data-scope='accordion' and @data-part='item-content'][1]"
            )
            self.open_section(content.get_attribute("id").split(":content:", 1)[1])
            self.until(lambda d: root.is_displayed(), message=f"param {name} visible")
        if show:
            self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", root)
        return root

    def field_names(self) -> list[str]:
        """The params of the form, in form order, by name; a ``format: date-time`` one has no
        name in the DOM and is listed by its label (which ``field`` also accepts)."""
        names = []
        for root in self.dialog().find_elements(
            By.CSS_SELECTOR, "[data-testid=config-form] [data-scope=field][data-part=root]"
        ):
            named = root.find_elements(By.CSS_SELECTOR, "[name^=element_], [id^=element_]")
            if named:
                n = named[0].get_attribute("name") or named[0].get_attribute("id")
                n = n[len("element_") :]
            elif root.find_elements(By.CSS_SELECTOR, "[data-testid=datetime-input]"):
                label = root.find_element(By.CSS_SELECTOR, "[data-part=label]")
                n = (label.get_attribute("textContent") or "").replace("*", "").strip()
            else:
                continue  # Advanced Options: Run ID, note, conf
            if n not in names:
                names.append(n)
        return names

    def field_kind(self, name: str) -> str:
        """``text``, ``textarea``, ``number``, ``boolean``, ``select``, ``multiselect``,
        ``array`` (one entry per line), ``json`` (Monaco editor), ``datetime`` or ``unknown``."""
        root = self.field(name, show=False)

        def has(css: str) -> bool:
            return bool(root.find_elements(By.CSS_SELECTOR, css))

        if has("[data-testid=datetime-input]"):
            return "datetime"
        if has("[data-scope=number-input]"):
            return "number"
        if has("[data-scope=switch]"):
            return "boolean"
        if has("[data-mode-id=json], [data-uri^='inmemory://']"):
            return "json"
        if has("textarea[name^=element_]"):
            placeholder = (
                root.find_element(By.CSS_SELECTOR, "textarea[name^=element_]").get_attribute("placeholder") or ""
            )
            return "array" if "line" in placeholder else "textarea"
        if has("input[type=hidden][name^=element_]") and has("input[role=combobox]"):
            combo = root.find_element(By.CSS_SELECTOR, "input[role=combobox]")
            multi = "multiple" in (combo.get_attribute("aria-label") or "") or has("[aria-label^='Remove ']")
            return "multiselect" if multi else "select"
        if has("input[name^=element_]"):
            return "text"
        return "unknown"

    def _monaco_text(self, container: WebElement) -> str:
        """The lines Monaco renders (all of them for the small editors of the form)."""
        lines = container.find_elements(By.CSS_SELECTOR, ".view-lines .view-line")
        ordered = sorted(
            (
                (
                    int(re.search(r"top:\s*(-?\d+)", ln.get_attribute("style") or "top:0").group(1)),
                    ln.get_attribute("textContent"),
                )
                for ln in lines
            )
        )
        return "\n".join(t for _, t in ordered).replace("\u00a0", " ")

    def _monaco_set(self, container: WebElement, text: str) -> None:
        """Replaces an editor's text as typed by a user: select all, then the new text inserted
        in one go (no per-key auto-closing of brackets), then whatever Monaco auto-closed after
        the cursor is deleted. ``text`` should be one line (``json.dumps`` without indent)."""
        self.click(container.find_element(By.CSS_SELECTOR, ".view-lines"))
        ActionChains(self.driver).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL).perform()
        if text:
            self.driver.execute_cdp_cmd("Input.insertText", {"text": text})
            ActionChains(self.driver).key_down(Keys.CONTROL).key_down(Keys.SHIFT).send_keys(Keys.END).key_up(
                Keys.SHIFT
            ).key_up(Keys.CONTROL).send_keys(Keys.DELETE).perform()
        else:
            ActionChains(self.driver).send_keys(Keys.DELETE).perform()

    def get_field(self, name: str) -> Any:
        """The value the form shows for a param, as Python: str, int/float, bool, list, dict
        (the JSON editor's text when it is not valid JSON), or None when empty."""
        kind = self.field_kind(name)
        root = self.field(name, show=kind == "json")  # Monaco renders nothing while hidden
        if kind == "number":
            raw = root.find_element(By.CSS_SELECTOR, "input[name^=element_]").get_attribute("value")
            if raw in ("", None):
                return None
            return float(raw) if re.search(r"[.eE]", raw) else int(raw)
        if kind == "boolean":
            return root.find_element(By.CSS_SELECTOR, "input[type=checkbox]").is_selected()
        if kind in ("array", "textarea"):
            raw = root.find_element(By.CSS_SELECTOR, "textarea[name^=element_]").get_attribute("value")
            if kind == "textarea":
                return raw
            return [line for line in raw.split("\n")] if raw else []
        if kind == "select":
            raw = root.find_element(By.CSS_SELECTOR, "input[type=hidden][name^=element_]").get_attribute("value")
            return raw or None
        if kind == "multiselect":
            return [
                h.get_attribute("value")
                for h in root.find_elements(By.CSS_SELECTOR, "input[type=hidden][name^=element_]")
                if h.get_attribute("value")
            ]
        if kind == "json":
            text = self._monaco_text(root)
            try:
                return json.loads(text)
            except ValueError:
                return text
        if kind == "datetime":  # as shown, e.g. "Jan 02, 2026 03:04" (UTC); None when empty
            text = (
                root.find_element(By.CSS_SELECTOR, "[data-testid=datetime-input]").get_attribute("textContent") or ""
            ).strip()
            return None if not text or text == DATETIME_PLACEHOLDER else text
        return root.find_element(By.CSS_SELECTOR, "input[name^=element_]").get_attribute("value")

    def _type_into(self, name: str, css: str, text: str, *, exact: bool = True, attempts: int = 5) -> None:
        """Clears a text input and types ``text``. A section that is still opening, or a field
        React re-renders as it empties, can refuse keys for a moment ("element not
        interactable", a stale element), or, on a loaded machine, swallow a key while it
        re-renders: the input is found again and typed again (one key at a time), until it holds
        exactly ``text`` (with ``exact``)."""
        for attempt in range(attempts):
            try:
                element = self.field(name).find_element(By.CSS_SELECTOR, css)
                self.until(lambda d: element.is_displayed() and element.is_enabled(), message=f"param {name} editable")
                self.click(element)
                element.send_keys(Keys.CONTROL, "a")
                element.send_keys(Keys.BACKSPACE)
                if text and attempt == 0:
                    element.send_keys(text)
                elif text:  # on a loaded machine a re-render can swallow a key: one key at a time
                    for ch in text:
                        element.send_keys(ch)
                        time.sleep(0.01)
                if not exact or (element.get_attribute("value") or "") == text:
                    return
            except (ElementNotInteractableException, StaleElementReferenceException):
                if attempt == attempts - 1:
                    raise
            time.sleep(0.3)
        raise AssertionError(
            f"param {name}: typed {text!r}, the field holds "
            f"{self.field(name).find_element(By.CSS_SELECTOR, css).get_attribute('value')!r}"
        )

    def set_field(self, name: str, value: Any) -> None:
        """Sets a param as a user would. Arrays: a list (one line each); JSON editors: any JSON
        value (a ``str`` is typed as is, e.g. to test invalid JSON); selects: the option's
        value or its shown label; datetime: a ``datetime`` or ``"YYYY-MM-DD HH:MM"``; None
        empties the field. The field keeps the focus (see ``blur``)."""
        kind = self.field_kind(name)
        root = self.field(name)
        if kind in ("text", "number", "array", "textarea"):
            css = "textarea[name^=element_]" if kind in ("array", "textarea") else "input[name^=element_]"
            text = "" if value is None else "\n".join(str(v) for v in value) if kind == "array" else str(value)
            self._type_into(name, css, text, exact=kind != "number")  # a number input may reformat
            return
        if kind == "boolean":
            box = root.find_element(By.CSS_SELECTOR, "input[type=checkbox]")
            if box.is_selected() != bool(value):
                self.click(root.find_element(By.CSS_SELECTOR, "[data-scope=switch][data-part=root]"))
                self.until(lambda d: box.is_selected() == bool(value), message=f"switch {name}")
            return
        if kind == "json":
            self._monaco_set(root, "" if value is None else value if isinstance(value, str) else json.dumps(value))
            return
        if kind == "select":
            self._select_option(name, root, value)
            return
        if kind == "multiselect":
            self._set_multiselect(name, root, list(value or []))
            return
        if kind == "datetime":
            self._set_datetime(root, value)
            return
        raise NotImplementedError(f"param {name}: cannot set a {kind} field")

    def _menu_options(self) -> list[WebElement]:
        return [
            o
            for o in self.driver.find_elements(By.CSS_SELECTOR, "[id^=react-select-][id*='-option-']")
            if o.is_displayed()
        ]

    def _select_option(self, name: str, root: WebElement, value: Any) -> None:
        hidden = root.find_element(By.CSS_SELECTOR, "input[type=hidden][name^=element_]")
        combo = root.find_element(By.CSS_SELECTOR, "input[role=combobox]")
        if value is None:
            self.click(combo)
            combo.send_keys(Keys.BACKSPACE)
            self.blur()
            return
        want = str(value)

        def open_menu() -> list[WebElement]:
            self.click(combo)
            if not self._menu_options():
                combo.send_keys(Keys.ARROW_DOWN)
            return self.until(lambda d: self._menu_options(), message=f"options of {name}")

        options = open_menu()
        texts = [o.text.strip() for o in options]
        if want in texts:  # shown label == value (or the caller gave the label)
            self.click(options[texts.index(want)])
            return
        for i in range(len(texts)):  # values_display: find the option whose value is ``want``
            self.click(open_menu()[i])
            if hidden.get_attribute("value") == want:
                return
        raise AssertionError(f"param {name}: no option with value or label {want!r} (labels: {texts})")

    def _set_multiselect(self, name: str, root: WebElement, values: list[Any]) -> None:
        combo = root.find_element(By.CSS_SELECTOR, "input[role=combobox]")
        self.click(combo)
        for _ in range(len(self.get_field(name) or [])):
            combo.send_keys(Keys.BACKSPACE)
        for v in values:
            combo.send_keys(str(v))
            self.until(lambda d: self._menu_options(), message=f"option {v} of {name}")
            combo.send_keys(Keys.ENTER)
        self.blur()  # not Escape: with no menu open, Escape closes the whole dialog
        got = self.get_field(name)
        if got != [str(v) for v in values]:
            raise AssertionError(f"param {name}: set {values!r}, form shows {got!r}")

    def _set_datetime(self, root: WebElement, value: Any) -> None:
        self.click(root.find_element(By.CSS_SELECTOR, "[data-testid=datetime-input]"))
        pop = self.until(
            lambda d: self.visible("[data-scope=popover][data-part=content] input[placeholder='YYYY/MM/DD']"),
            message="date-time popover",
        )[0].find_element(By.XPATH, "./ancestor::*[@data-scope='popover' and @data-part='content'][1]")
        date_in = pop.find_element(By.CSS_SELECTOR, "input[placeholder='YYYY/MM/DD']")
        time_in = pop.find_element(By.CSS_SELECTOR, "input[placeholder='HH:mm']")
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        for element, text in (
            (date_in, value.strftime("%Y/%m/%d") if value else ""),
            (time_in, value.strftime("%H:%M") if value else ""),
        ):
            self.click(element)
            element.send_keys(Keys.CONTROL, "a")
            element.send_keys(Keys.BACKSPACE)
            if text:
                element.send_keys(text)
        time_in.send_keys(Keys.ESCAPE)  # closes the popover, not the dialog
        self.until(lambda d: _gone(pop), message="date-time popover closed")

    def field_error_text(self, name: str) -> str | None:
        """The validation message shown under a param, or None."""
        root = self.field(name, show=False)
        for e in root.find_elements(By.CSS_SELECTOR, "[data-scope=field][data-part=error-text]"):
            text = (e.get_attribute("textContent") or "").strip()
            if text:
                return text
        return None

    def field_invalid(self, name: str) -> bool:
        return self.field(name, show=False).get_attribute("data-invalid") is not None

    def wait_field_error(self, name: str, timeout: float | None = None) -> str:
        return self.until(lambda d: self.field_error_text(name), timeout, message=f"validation message of {name}")

    def submit_button(self) -> WebElement:
        return self.dialog().find_element(By.CSS_SELECTOR, "[data-testid=trigger-dag-submit]")

    def trigger_button_enabled(self) -> bool:
        return self.submit_button().is_enabled()

    def set_run_id(self, run_id: str) -> None:
        content = self.open_section("advancedOptions")
        element = content.find_element(By.NAME, "dagRunId")
        element.send_keys(Keys.CONTROL, "a")
        element.send_keys(Keys.BACKSPACE)
        element.send_keys(run_id)

    def trigger_error_text(self, *, new_only: bool = False) -> str | None:
        """The error the dialog shows after a rejected submit (e.g. a param the server rejects)."""
        try:
            alerts = self.dialog().find_elements(By.CSS_SELECTOR, "[data-testid=error-alert]")
        except NoSuchElementException:
            return None
        texts = [
            (a.get_attribute("textContent") or "").strip()
            for a in alerts
            if not (new_only and a.get_attribute("data-mysqlcdc-seen"))
        ]
        return "\n".join(t for t in texts if t) or None

    def submit_trigger(self, *, expect_success: bool = True, timeout: float = 30) -> str | None:
        """Clicks Trigger. Returns the new run's id (the UI opens the run's page), or, when the
        dialog shows an error instead: raises ``TriggerRejected`` (or returns None if
        ``expect_success`` is False)."""
        before = self.driver.current_url
        button = self.submit_button()
        if not button.is_enabled():
            raise TriggerRejected(
                "the Trigger button is disabled: "
                + str({n: self.field_error_text(n) for n in self.field_names() if self.field_invalid(n)})
            )
        # An error of an earlier submit stays until this one's request starts: mark it as seen
        # (a new error is a new element, the mutation unmounts the old one).
        self.driver.execute_script(
            "arguments[0].querySelectorAll('[data-testid=error-alert]')"
            ".forEach(e => e.setAttribute('data-mysqlcdc-seen', '1'))",
            self.dialog(),
        )
        self.click(button)

        def outcome(d):
            url = d.current_url
            if "/runs/" in url and url != before and not self.visible(DIALOG):
                return ("run", url)
            error = self.trigger_error_text(new_only=True) if self.visible(DIALOG) else None
            return ("error", error) if error else False

        kind, detail = self.until(outcome, timeout, message="trigger outcome")
        if kind == "error":
            if expect_success:
                raise TriggerRejected(detail)
            return None
        path = urllib.parse.urlparse(detail).path
        return urllib.parse.unquote(path.split("/runs/", 1)[1].split("/", 1)[0])

    def close_dialog(self) -> None:
        dialog = self.dialog()
        self.click(dialog.find_element(By.CSS_SELECTOR, "[data-part=close-trigger]"))
        self.until(lambda d: _gone(dialog), message="dialog closed")

    # ---- runs, task instances, logs ----------------------------------------------------

    def open_run(self, dag_id: str, run_id: str) -> None:
        """The run's page: the grid on the left, its task instances on the right."""
        self.driver.get(self.url(f"/dags/{self.q(dag_id)}/runs/{self.q(run_id)}"))
        self.until(
            lambda d: (
                d.find_elements(By.CSS_SELECTOR, "[data-testid=header-card]")
                and d.find_elements(By.CSS_SELECTOR, f"a[id^='grid-{run_id}-']")
            ),
            message=f"run {run_id}",
        )

    def grid_cell(self, run_id: str, task_id: str) -> WebElement:
        return self.until(
            EC.presence_of_element_located((By.ID, f"grid-{run_id}-{task_id}")), message=f"grid cell of {task_id}"
        )

    def open_task_instance(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = -1, try_number: int | None = None
    ) -> None:
        path = f"/dags/{self.q(dag_id)}/runs/{self.q(run_id)}/tasks/{self.q(task_id)}"
        if map_index >= 0:
            path += f"/mapped/{map_index}"
        if try_number is not None:
            path += f"?try_number={try_number}"
        self.driver.get(self.url(path))
        self.until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid=virtualized-list]"),
            message=f"task instance {task_id}[{map_index}] log",
        )

    def open_mapped_instance_from_grid(self, dag_id: str, run_id: str, task_id: str, map_index: int) -> None:
        """Clicks through like a user: the run's grid cell of a mapped task, then one map index."""
        self.open_run(dag_id, run_id)
        self.click(self.grid_cell(run_id, task_id))
        link = self.until(
            EC.element_to_be_clickable((By.CSS_SELECTOR, f"a[href$='/tasks/{task_id}/mapped/{map_index}']")),
            message=f"mapped instance {map_index} of {task_id}",
        )
        self.click(link)
        self.until(
            lambda d: (
                d.current_url.rstrip("/").endswith(f"/mapped/{map_index}")
                and d.find_elements(By.CSS_SELECTOR, "[data-testid=virtualized-list]")
            ),
            message=f"task instance {task_id}[{map_index}]",
        )

    def _expand_log_groups(self) -> None:
        if not self.driver.find_elements(By.CSS_SELECTOR, "[data-testid^=group-header-]"):
            return
        collapsed = [
            e
            for e in self.driver.find_elements(By.CSS_SELECTOR, "[data-testid^=summary-]")
            if (e.text or "").lstrip().startswith("\u25b6")
        ]  # ▶
        if not collapsed:
            return
        self.click(self.driver.find_element(By.CSS_SELECTOR, "[data-testid=log-settings-button]"))
        item = self.until(
            EC.element_to_be_clickable((By.CSS_SELECTOR, "[data-testid=log-settings-expand]")),
            message="log settings menu",
        )
        self.click(item)
        self.until(
            lambda d: (
                not any(
                    (e.text or "").lstrip().startswith("\u25b6")
                    for e in d.find_elements(By.CSS_SELECTOR, "[data-testid^=summary-]")
                )
            ),
            message="log groups expanded",
        )

    _LOG_ROWS_JS = """
        const s = arguments[0], want = arguments[1], out = [];
        if (want !== null) {
            const target = Math.max(0, Math.min(want, s.scrollHeight - s.clientHeight));
            if (Math.abs(s.scrollTop - target) > 1) s.scrollTop = target;
        }
        for (const r of s.querySelectorAll('[data-index]')) {
            const c = r.cloneNode(true);
            c.querySelectorAll('[data-copy-exclude]').forEach(e => e.remove());
            out.push([parseInt(r.getAttribute('data-index')), c.textContent]);
        }
        return [out, s.scrollTop, s.clientHeight, s.scrollHeight];"""

    def _log_rows(self) -> str:
        """Every row of the virtualized log, scrolling it through. Only the rows in view are in
        the DOM and they follow a scroll a frame or two later, so after each scroll the rows
        are taken once they are new ones adjoining those already read (no gap, no stale read);
        at the end, once they stop changing. The page may scroll the list itself (to the end
        of the log, when it loads): each poll puts it back where this reading is."""
        scroller = self.driver.find_element(By.CSS_SELECTOR, "[data-testid=virtual-scroll-container]")
        rows: dict[int, str] = {}
        position = {"top": 0.0}

        def read(want: float | None):
            found, top, height, total = self.driver.execute_script(self._LOG_ROWS_JS, scroller, want)
            position["top"], position["height"] = top, height
            return {i: t for i, t in found}, top + height >= total - 2

        seen, at_end = self.until(
            lambda d: (lambda r: r if (not r[0] or 0 in r[0]) else False)(read(0)), message="first log rows"
        )
        rows.update(seen)
        while not at_end:
            last = max(rows)
            want = position["top"] + max(20.0, position["height"] * 0.8)

            def moved(d):
                found, end = read(want)
                if found and min(found) <= last + 1 and (max(found) > last or end):
                    return found, end
                return False

            seen, at_end = self.until(moved, message="log rows after scrolling")
            rows.update(seen)
        stable = 0
        while stable < 3:  # the last window: until three reads 0.1 s apart agree
            time.sleep(0.1)
            found, _ = read(None)
            stable = stable + 1 if found.keys() <= rows.keys() else 0
            rows.update(found)
        return "\n".join(rows[i] for i in sorted(rows))

    def task_log_text(self, wait_for: str | None = None, timeout: float = 30) -> str:
        """The log of the open task instance as shown (groups expanded), one row per line;
        with ``wait_for``, until that text is in it (reloading the page, as a user would, while
        the task still writes its log). Returns what it read last if the text never comes."""
        deadline = time.monotonic() + timeout
        text = ""
        while True:
            try:
                self.until(
                    lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid=virtualized-list] [data-index]"),
                    max(1.0, deadline - time.monotonic()),
                    message="log rows",
                )
                self._expand_log_groups()
                text = self._log_rows()
            except (StaleElementReferenceException, TimeoutException):  # the list re-rendered (log reloaded)
                if time.monotonic() > deadline:
                    raise
                continue
            if wait_for is None or wait_for in text or time.monotonic() > deadline:
                return text
            time.sleep(1)
            self.driver.refresh()

    def read_task_log(
        self,
        dag_id: str,
        run_id: str,
        task_id: str,
        map_index: int = -1,
        try_number: int | None = None,
        wait_for: str | None = None,
        timeout: float = 30,
    ) -> str:
        self.open_task_instance(dag_id, run_id, task_id, map_index, try_number)
        return self.task_log_text(wait_for=wait_for, timeout=timeout)

    def _ti_action_dialog(self) -> WebElement:
        return self.until(
            lambda d: next(
                (e for e in self.visible(DIALOG) if e.find_elements(By.CSS_SELECTOR, "[data-testid=table-list]")), False
            ),
            message="task instance dialog",
        )

    def affected_tasks(self) -> list[tuple[str, int, str]]:
        """The (task_id, map_index, state) rows of an open clear/mark dialog."""
        dialog = self._ti_action_dialog()
        self.until(
            lambda d: dialog.find_elements(By.CSS_SELECTOR, "[data-testid=table-list] tbody tr"),
            message="affected tasks",
        )
        out = []
        for row in dialog.find_elements(By.CSS_SELECTOR, "[data-testid=table-list] tbody tr"):
            cell = {
                c.get_attribute("data-testid")[len("table-cell-") :]: c.text.strip()
                for c in row.find_elements(By.CSS_SELECTOR, "td[data-testid^=table-cell-]")
            }
            mi = cell.get("map_index", "")
            out.append((cell.get("task_id", ""), int(mi) if mi.lstrip("-").isdigit() else -1, cell.get("state", "")))
        return out

    def open_clear_dialog(self) -> WebElement:
        """On a task instance page: its Clear dialog."""
        self.click(
            self.until(
                EC.element_to_be_clickable((By.CSS_SELECTOR, "[aria-label*='to clear']")), message="clear button"
            )
        )
        return self._ti_action_dialog()

    def open_mark_as_dialog(self, state: str = "failed") -> WebElement:
        """On a task instance page: Mark as ``failed``/``success`` and its dialog."""
        self.click(
            self.until(
                EC.element_to_be_clickable((By.CSS_SELECTOR, "[aria-label='Mark Task Instance as...']")),
                message="mark-as button",
            )
        )
        self.click(
            self.until(
                EC.element_to_be_clickable((By.CSS_SELECTOR, f"[role=menuitem][data-value={state}]")),
                message=f"mark as {state}",
            )
        )
        return self._ti_action_dialog()

    def toggle_dialog_option(self, label: str) -> None:
        """Past / Future / Upstream / Downstream / Clear only failed tasks."""
        dialog = self._ti_action_dialog()
        button = next(
            (b for b in dialog.find_elements(By.CSS_SELECTOR, "button[data-group-item]") if b.text.strip() == label),
            None,
        )
        if button is None:
            raise NoSuchElementException(f"no option {label!r} in the dialog")
        self.click(button)

    def confirm_dialog(self) -> None:
        dialog = self._ti_action_dialog()
        button = next(b for b in dialog.find_elements(By.TAG_NAME, "button") if b.text.strip() == "Confirm")
        self.until(lambda d: button.is_enabled(), message="Confirm enabled")
        self.click(button)
        self.until(lambda d: _gone(dialog), message="dialog closed after Confirm")


def open_browser_logged_in(base_url: str, user: str, password: str, **kw: Any) -> Browser:
    browser = Browser.start(**kw)
    try:
        browser.login(base_url, user, password)
    except BaseException:
        browser.dump("login-failed")
        browser.close()
        raise
    return browser


__all__ = ["Browser", "TriggerRejected", "artifacts_dir", "chrome", "open_browser_logged_in"]
