// Foundry's application classes, as far as a module meets them: the two
// bases a settings menu must extend (FormApplication, ApplicationV2), the
// dialogs, and an AppV1 actor sheet shaped like sfrpg's, which submits its
// whole form.

/** AppV1's base (foundry-vtt-types v12.331.5 client/apps/app.d.mts). */
export class Application {
  static _appIds = 0;
  constructor(options = {}) {
    this.options = options;
    this.appId = Application._appIds++;
    this.rendered = false;
  }
  render() {
    this.rendered = true;
    return this;
  }
  close() {
    this.rendered = false;
    return Promise.resolve();
  }
}

/** AppV1's form base (client/apps/form.d.mts). */
export class FormApplication extends Application {
  constructor(object = {}, options = {}) {
    super(options);
    this.object = object;
  }
}

/** AppV2 (v12 client-esm/applications/api/application.d.mts; v13
 * client/applications/api/application.d.mts): `render(options)` resolves
 * with the application. */
export class ApplicationV2 {
  constructor(options = {}) {
    this.options = options;
    this.rendered = false;
  }
  async render() {
    this.rendered = true;
    return this;
  }
  async close() {
    this.rendered = false;
    return this;
  }
}

/** DialogV2 (AppV2's dialog): the module's dialogs in v13; recorded so a
 * test can press a button. */
export class DialogV2 extends ApplicationV2 {
  static opened = [];
  constructor(options = {}) {
    super(options);
    this.listeners = new Map();
    DialogV2.opened.push(this);
  }
  addEventListener(type, fn) {
    this.listeners.set(type, fn);
  }
}

/** AppV1's Dialog (v12). */
export class Dialog extends Application {
  static opened = [];
  constructor(data, options = {}) {
    super(options);
    this.data = data;
    Dialog.opened.push(this);
  }
}

/** The inputs of sfrpg's character sheet form (foundryvtt-starfinder
 * static/templates/actors/character-sheet.hbs: name, the HP value and
 * temporary HP, SP, RP, the level, each ability's value and damage). */
export const SFRPG_SHEET_INPUTS = [
  "name",
  "system.attributes.hp.value",
  "system.attributes.hp.temp",
  "system.attributes.sp.value",
  "system.attributes.rp.value",
  "system.details.level.value",
  ...["str", "dex", "con", "int", "wis", "cha"].flatMap((a) => [`system.abilities.${a}.value`, `system.abilities.${a}.damage`]),
];

function read(obj, path) {
  return path.split(".").reduce((v, k) => (v == null ? undefined : v[k]), obj);
}

/**
 * An AppV1 actor sheet as sfrpg's (foundryvtt-starfinder src/module/actor/
 * sheet/base.js, ActorSheetSFRPG extends foundry.appv1.sheets.ActorSheet):
 * - render(): Application#_render is asynchronous (getData, the template),
 *   then the render hooks of each class in the chain ("renderActorSheet"
 *   among them), with the inner HTML and the data;
 * - the document re-renders its open sheets after each update
 *   (ClientDocumentMixin#_onUpdate -> render(false)), asynchronously;
 * - submit(): FormApplication#_onSubmit -> _getSubmitData, which sfrpg's
 *   sheet returns with every named input of the form, changed or not (only
 *   its currency fields get arithmetic), then _updateObject ->
 *   actor.update(formData): Foundry runs the preUpdate hooks on that whole
 *   submitted change and diffs afterwards.
 */
export class SfrpgActorSheet extends FormApplication {
  constructor(actor, Hooks) {
    super(actor);
    this.actor = actor;
    this.Hooks = Hooks;
    this.inputs = null; // the form's values, as last rendered
    actor.apps.add(this);
  }
  get document() {
    return this.actor;
  }
  /** The form as rendered: every input's value from the actor's data. */
  formValues() {
    const out = {};
    for (const path of SFRPG_SHEET_INPUTS) {
      const v = read(this.actor._source, path) ?? read(this.actor, path);
      if (v !== undefined) out[path] = v;
    }
    return out;
  }
  async render() {
    const values = this.formValues(); // getData, before the template renders
    await new Promise((r) => setImmediate(r)); // renderTemplate
    this.inputs = values;
    this.rendered = true;
    const html = [{ querySelector: () => null, querySelectorAll: () => [] }]; // jQuery of the inner form
    for (const hook of ["renderActorSheetSFRPGCharacter", "renderActorSheetSFRPG", "renderActorSheet"]) {
      this.Hooks.callAll(hook, this, html, { actor: this.actor, system: this.actor.system });
    }
    return this;
  }
  /** The user changes `changes` in the form and it submits (submitOnChange). */
  submit(changes = {}) {
    if (!this.inputs) throw new Error("the sheet is not rendered");
    return this.actor.update({ ...this.inputs, ...changes });
  }
  async close() {
    this.actor.apps.delete(this);
    this.rendered = false;
    for (const hook of ["closeActorSheetSFRPGCharacter", "closeActorSheetSFRPG", "closeActorSheet"]) {
      this.Hooks.callAll(hook, this, [{}]);
    }
  }
}
