// Asks a question's items with QuickPicks (and an InputBox for "Other…") and returns the answers.

import * as vscode from 'vscode';
import { pickSpec, toAnswer, type PickItem } from './pure/questions';
import type { Answer, Question } from './pure/types';

type QPItem = vscode.QuickPickItem & { pick: PickItem };

function pickOnce(spec: ReturnType<typeof pickSpec>): Promise<PickItem[] | undefined> {
  return new Promise((resolve) => {
    const qp = vscode.window.createQuickPick<QPItem>();
    qp.title = spec.title;
    qp.placeholder = spec.placeholder;
    qp.canSelectMany = spec.canPickMany;
    qp.ignoreFocusOut = true;
    qp.matchOnDescription = true;
    qp.items = spec.items.map((p) => ({
      label: p.label,
      description: p.description,
      pick: p,
      alwaysShow: !!p.isOther,
    }));
    let done = false;
    qp.onDidAccept(() => {
      const chosen = spec.canPickMany ? [...qp.selectedItems] : [...qp.activeItems].slice(0, 1);
      if (!chosen.length) return;
      done = true;
      resolve(chosen.map((c) => c.pick));
      qp.hide();
    });
    qp.onDidHide(() => {
      if (!done) resolve(undefined);
      qp.dispose();
    });
    qp.show();
  });
}

/** Asks every item of the question in turn. Undefined when the person cancels. */
export async function askQuestion(question: Question, ticketTitle?: string): Promise<Answer[] | undefined> {
  const answers: Answer[] = [];
  for (let i = 0; i < question.items.length; i++) {
    const item = question.items[i];
    const spec = pickSpec(question, i, ticketTitle);
    for (;;) {
      let picked: PickItem[] = [];
      if (!spec.textOnly) {
        const p = await pickOnce(spec);
        if (!p) return undefined;
        picked = p;
      }
      let other: string | undefined;
      if (spec.textOnly || picked.some((p) => p.isOther)) {
        other = await vscode.window.showInputBox({
          title: spec.title,
          prompt: item.question,
          placeHolder: 'Your answer',
          ignoreFocusOut: true,
          validateInput: (v) => (v.trim() ? undefined : 'Type an answer, or press Escape to go back'),
        });
        if (other === undefined) {
          if (spec.textOnly) return undefined;
          continue; // back to the list
        }
      }
      const answer = toAnswer(item, picked, other);
      if (answer) {
        answers.push(answer);
        break;
      }
    }
  }
  return answers;
}
