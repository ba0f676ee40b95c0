/**
 * Does remembered text read like an instruction to the assistant? (issue 17, part 2)
 *
 * An agent writes what it remembers through MCP (`kindgi_remember`), and what it remembers may
 * come from a web page, an email or a user who wants the next conversation to obey them. The
 * `<memory>` block already tells the model that its content is data (src/memory/prompt.ts);
 * this is the second wall: text that reads like an instruction is held for a person's review
 * (`review: "pending"`) and no retrieval returns it until someone verifies it.
 *
 * A handful of patterns, each for one way an instruction shows itself: a role tag or chat
 * template token, a request to drop earlier instructions, an address to the assistant or the
 * model as "you", an imperative about how to answer or what to hide, a request to send data
 * somewhere. Memories are mostly third-person statements ("prefers email", "ordered parts on
 * 3 May"), and a to-do aimed at the user ("call the plumber") is not aimed at the assistant,
 * so the patterns look for the assistant being addressed rather than for any imperative.
 * A false alarm costs a person one click; a miss puts an instruction in front of a model.
 *
 * Measured on labelled sets written by authors who never saw these patterns
 * (test/fixtures/instruction-like/README.md): on the one never tuned on, precision 1.00 but
 * recall 0.32. Patterns catch the phrasings someone thought of; a deployment that cannot afford
 * a miss holds every remembered fact (MNEMO_MCP_REVIEW=all).
 */

/** Why a text was held: one label per pattern that matched, for the reviewer and the logs. */
export type InstructionSignal =
  | 'role-tag'
  | 'override'
  | 'assistant-addressed'
  | 'response-directive'
  | 'secrecy'
  | 'exfiltration';

/** Second person, in the languages the patterns know: who an instruction is aimed at. */
const YOU = String.raw`(?:you|u|tu|vous|du|sie|usted|tú|eres|voi|você|jij|je)`;
/** "From now on", in the languages the patterns know. */
const FROM_NOW_ON = String.raw`(?:from now on|これ以降|今後|从现在开始|从今以后|с этого момента|od teraz|من الآن|henceforth|going forward|à partir de maintenant|dorénavant|désormais|ab sofort|ab jetzt|von nun an|a partir de ahora|de ahora en adelante|d'ora in poi|da ora in poi|a partir de agora|daqui em diante|vanaf nu)`;
/** Drop, in those languages. */
const DROP = String.raw`(?:忽略|無視|игнорируй\S*|zignoruj|تجاهل|ignore|disregard|forget|override|bypass|set aside|put aside|stop following|ignorez?|oublie[zs]?|ignoriere|vergiss|vergessen sie|ignora|ignorar|olvida|olvide|esqueça|esqueca|negeer|vergeet)`;
/** What came before, in those languages. */
const RULES = String.raw`(?:safety (?:policies|policy|rules|guidelines|checks)|設定|设置|指示|инструкции|instrukcje|التعليمات|instructions?|prompts?|rules?|directions?|guidelines?|directives?|constraints?|programming|system message|consignes?|anweisungen|regeln|instrucciones|reglas|istruzioni|regole|instruções|instrucoes|regras|instructies|regels|everything (?:you were|you've been|you have been) told)`;
/** Who an instruction may name as its reader, in the languages above and a few more. */
const READER_ANY = String.raw`(?:assistant|asistente|assistente|assistent|asystent\S*|ассистент\S*|помощник|アシスタント|助手|المساعد|bot|ki|ia|ai|model|modèle|modell|modelo|llm|chatbot|agent|agente|claude|chatgpt|copilot|gemini)`;
/** Telling someone nothing, in those languages. */
const DO_NOT_TELL = String.raw`(?:no le digas|no digas|no menciones|nie informuj|nie mów|не говори|не упоминай|не сообщай|не рассказывай|لا تخبر|ne dis pas|ne dites pas|ne mentionne pas|sag nicht|sagen sie nicht|erwähne nicht|non dire|non dirle|não diga|não conte|不要告诉|别告诉|言わないで|伝えないで|知らせないで)`;
/** Who an instruction may name as its reader. */
const READER = String.raw`(?:assistant|ai|a\.i\.|model|language model|llm|chatbot|bot|claude|chatgpt|gpt(?:-?\d)?|gemini|copilot)`;

const patterns: readonly (readonly [InstructionSignal, RegExp])[] = [
  // Chat templates and role prefixes that a model reads as a turn of its own conversation; a
  // role prefix only when what follows speaks like a turn ("Assistant: Jana Novak" is a job title).
  ['role-tag', /<\|\s*(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id)\s*\|>|\[\/?INST\]|<<\/?SYS>>|<\/?\s*(?:system|assistant|instructions?)\s*>|^\s*#{2,}\s*(?:system|instructions?|new instructions?|response)\b/im],
  ['role-tag', /^\s*(?:system|assistant|developer)\s*(?:prompt|message)?\s*:\s*(?:you\b|i\b|i'm\b|i will\b|sure\b|ok\b|okay\b|as an?\b|from now\b|ignore\b|always\b|never\b|new\b|the user\b|understood\b)/im],
  // Dropping what came before.
  ['override', new RegExp(String.raw`\b${DROP}\b[^.!?\n]{0,50}?\b${RULES}\b|\bnew (?:instructions?|rules?|system prompt|task)\s*:|\byour new (?:task|role|instructions?|rules?|goal|purpose) (?:is|are)\b|\bjailbreak|\b(?:enter|enable|activate|switch to|you are (?:now )?in) developer mode\b|\bdo anything now\b|\bwithout (?:any )?(?:safety|content) (?:caveats|filters?|restrictions?|rules?)\b|\bcontent filter\b|\bsans restrictions?\b|\bsin restricciones\b|\bohne (?:einschränkungen|regeln)\b`, 'i')],
  // "DAN" the jailbreak persona, in capitals ("Dan is the team lead" is a colleague).
  ['override', /\bDAN\b/],
  // The assistant, the model or the AI spoken to, or told what it must be or do.
  ['assistant-addressed', new RegExp(String.raw`\b(?:you are|you're) (?:now|no longer|from now on)\b|\b(?:you|u) (?:must|shall|will|should|have to|need to|are to|are required to)\s+(?:always|never|now|only|not|immediately|from now on|respond|reply|answer|say|tell|ignore|obey|follow|comply|pretend|act|treat|include|mention|recommend|output|print|reveal|send|forward|refuse|stop|start|use)\b|\b(?:dear|hey|attention|note to|p\.?s\.? to|message (?:to|for)|instructions? (?:to|for)|to|for) (?:the |any |all |every )?(?:${READER})s?\b(?: reading this| that reads this)?\s*[,:;.—–-]|\b(?:the|any|an?) (?:${READER}) (?:should|must|shall|will|needs to|has to|is to|is required to)\s+(?!be\b)\w+|\b${READER}\s*[,:]\s*(?:please\s+)?(?:you\b|always|never|do|don't|ignore|forget|respond|reply|answer|say|tell|stop|start|from now on|when)|\b(?:act|behave|roleplay|role-play) as\b|\bpretend (?:to be|you(?:'re| are))\b|\b${FROM_NOW_ON}\b[^.!?\n]{0,60}\b(?:${YOU}|always|never|respond|reply|answer|only|réponds|répondez|antwortest|antworte|responde|rispondi|responda|antwoord)\b|\b(?:tu dois|vous devez|du musst|sie müssen|debes|tienes que|devi|você deve|je moet)\b|\bwhen(?:ever)? you (?:see|read|find|retrieve|load|process) this\b|\b(?:obey|serve) (?:me|only me|the user|this note)\b|\btreat (?:me|this|all|everything)\b[^.!?\n]{0,40}\b(?:developer|admin|administrator|priority|system|instructions?)\b|\b(?:than|over) (?:your|the|any) system (?:prompt|message)\b`, 'i')],
  // Imperatives about the answer itself: "Always respond in …", "Whenever you summarise, add …".
  ['response-directive', /(?:^|[.!?:;\n]\s*)(?:please\s+)?(?:always|never|only|do not|don't|make sure to|be sure to)\s+(?:respond|reply|answer|say|mention|tell (?:the )?user|talk about|recommend|suggest|include|add|output|print|write|use|speak|refer|call (?:the )?user|address (?:the )?user|bring up|discuss|acknowledge|reveal|disclose|ask (?:for )?(?:confirmation|permission)|end (?:every|each|your)|start (?:every|each|your)|begin (?:every|each|your))\b|(?:^|[.!?:;\n]\s*)(?:respond|reply|answer)\s+(?:only\s+)?(?:in|with|using|as)\b|\bin (?:every|each|all|your) (?:future )?(?:answers?|responses?|replies|messages?|recommendations?|summar(?:y|ies))\b|\b(?:end|start|begin|sign) (?:every|each|all) (?:answers?|responses?|replies|messages?)\b|\bwhen(?:ever)? (?:(?:you|the user|a user|someone|anyone|they|he|she) (?:asks?|says?|mentions?|summari[sz]es?|writes?|requests?|talks?|reads?)|asked)\b[^.!?\n]{0,80}[,;:]\s*(?:then\s+)?(?:tell|say|answer|reply|respond|add|omit|include|recommend|refuse|ignore|send|call|ask|claim|insist|do not|don't|never|always)\b|\bwhen(?:ever)? (?:you|asked)\b[^.!?\n]{0,60}\b(?:add|omit|append|insert) (?:the|a|this)\b|\bjust (?:run|execute|do) (?:it|the command|them)\b|\b(?:review queue|mark (?:it|this)(?: memory)? as (?:approved|verified|trusted))\b/im],
  // Hiding things from the user, or revealing what the model was told.
  ['secrecy', /\b(?:do not|don't|never|skip|avoid)\s+(?:tell(?:ing)?|inform(?:ing)?|let(?:ting)?|show(?:ing)?|reveal(?:ing)?|disclos(?:e|ing)|mention(?:ing)? (?:this|it|that) to)\s+(?:the )?(?:user|customer|human|them|anyone)\b|\bwithout (?:telling|informing|letting) (?:the )?(?:user|customer|human)\b|\b(?:secretly|covertly|quietly|silently)\s+(?:skip|append|add|cc|bcc|send|forward|include|insert|change|tell|remove|omit)\b|\b(?:reveal|print|show|output|repeat|leak|dump|display)\b[^.!?\n]{0,40}\b(?:system prompt|hidden prompt|(?:your|initial|original|hidden) (?:instructions|prompt|rules|guidelines|configuration)|text above|everything above)\b|\bomit\b[^.!?\n]{0,60}\b(?:and|then) (?:say|tell|claim)\b|\bverschweig|\bne (?:dis|dites) (?:jamais|pas) à l'utilisateur\b/i],
  // Sending data somewhere: memory, conversation, keys, to a URL, an address or a tool.
  ['exfiltration', /\b(?:send|post|forward|upload|transmit|exfiltrate|copy|email|e-mail|leak|cc|bcc|append)\b[^.!?\n]{0,60}\b(?:conversation|chat history|chat log|memory|memories|context|transcript|api keys?|credentials?|passwords?|session tokens?|tokens?|secrets?|user data|personal data|all data|everything|contents of|email address|\.ssh|id_rsa)\b[^!?\n]{0,80}?(?:https?:\/\/|\bto\s+\S+@\S+|\bwebhook\b|\btool\b|\bevery (?:reply|answer|email|message)\b)|!\[[^\]]*\]\(https?:\/\/[^)]*[?&][^)]*=(?:\{|[A-Z_]{4,})|\b(?:call|use) the \w+ tool with\b/i],
  // Spoken to in any of those languages: "Asistente: …", "À l'assistant : …", "Nota para el bot: …".
  ['assistant-addressed', new RegExp(String.raw`(?:^|[.!?。\n]\s*|\b(?:to|for|à|a|al|an|para|pour|für|per|dla|для|إلى|note to|p\.?s\.? to)\s+(?:the |any |all |l'|el |la |le |den |die |der )?)${READER_ANY}(?:へ|に)?\s*[:：,，](?!\s*[A-Z][a-z]+ [A-Z][a-z]+)|${READER_ANY}\s*(?:へ|に)(?:[:：,，]|注意)|${READER_ANY}请注意|\b(?:to|for) (?:the |any |all |every )?(?:${READER})s? (?:reading|processing|summari[sz]ing|handling|reviewing|that reads|who reads)\b|\b(?:kindly|appreciate it if|required that|would you)\b[^.!?\n]{0,40}\b(?:the )?(?:${READER})\b|\b(?:the )?(?:${READER}) (?:is|are) (?:now )?(?:authori[sz]ed|allowed|permitted|instructed|required)\b|\byou are (?:\S+ ){1,2}now\b|\byour (?:real|true|actual|new|only|secret) (?:task|goal|job|purpose|mission|instructions?|orders?)\b|\b(?:this is|i am|i'm) (?:the|your) (?:developer|creator|administrator|admin|operator)\b|\btrust (?:the )?(?:instructions?|commands?|notes?) (?:found |stored )?in\b`, 'i')],
  ['role-tag', /\[(?:system|admin|developer|sys)\]|^\s*(?:system|admin|developer) (?:note|notice|message|override|update|instruction)s?\s*:|"role"\s*:\s*"system"/im],
  // Operating the agent rather than describing the world: "Tell the user …", "Delete every memory …".
  ['response-directive', /(?:^|[.!?:;\n]\s*)(?:tell|inform|remind) (?:the |every )?(?:user|customer|caller|client)s?\b|\b(?:delete|erase|wipe|purge|remove) (?:every|all|each|any) (?:memory|memories|note|notes|file|files|record|records)\b|\b(?:grant|give) \S+ (?:admin|owner|root|full) (?:rights|access|permissions?|privileges)\b|\brespond to (?:the )?next message\b|\bthe next time you (?:run|respond|answer|see|read|are asked)\b|\bwithout (?:asking|requesting|waiting for) (?:anyone|for confirmation|confirmation|permission|the user)\b|\bif (?:the user|a user|someone|anyone|they) (?:ever )?(?:mentions?|says?|asks?|writes?|types?)\b[^.!?\n]{0,80}[,;:]\s*(?:then\s+)?\w+|\bdecode (?:this|the following|it)\b[^.!?\n]{0,40}\b(?:do|follow|execute|run|obey)\b/im],
  ['secrecy', new RegExp(String.raw`${DO_NOT_TELL}|\b(?:refrain from|avoid) (?:mentioning|telling|revealing|disclosing)\b|\bkept? (?:\S+ ){0,4}to (?:itself|yourself|themselves)\b`, 'i')],
  ['exfiltration', /\b(?:log|record|capture|collect|harvest)\b[^.!?\n]{0,20}\b(?:everything|all)\b[^.!?\n]{0,20}\b(?:they|the user|he|she|users?) (?:types?|says?|writes?|enters?)\b|\bcollect (?:the )?(?:user'?s'?|their|his|her) (?:api keys?|passwords?|credentials?|tokens?|card)\b|\b(?:envoie|envoyez|sende|senden sie|envía|envia|invia|wyślij|отправ\S*|أرسل|把|上传|送信)\b[^\n]{0,120}(?:https?:\/\/|\S+@\S+\.\w+)|\b(?:email|send|forward|upload)\b[^.!?\n]{0,40}\b(?:contents? of|addresses|home address(?:es)?)\b[^.!?\n]{0,60}\b(?:address|endpoint|url|server|reply|@)/i],
];

/** Cyrillic letters that look Latin ("Ѕуѕtеm"), read as the Latin ones in one view. */
const HOMOGLYPHS: Record<string, string> = {
  а: 'a', е: 'e', о: 'o', р: 'p', с: 'c', у: 'y', х: 'x', і: 'i', ѕ: 's', ј: 'j', һ: 'h', ԁ: 'd', ӏ: 'l',
  А: 'A', В: 'B', Е: 'E', К: 'K', М: 'M', Н: 'H', О: 'O', Р: 'P', С: 'C', Т: 'T', Х: 'X', І: 'I', Ѕ: 'S', Ј: 'J',
};

/**
 * The views of a text the patterns read: as written, and with the two common disguises undone,
 * letters spaced out ("i g n o r e"), digits for letters ("1gn0re"), Cyrillic look-alikes, and
 * base64 runs decoded.
 */
function views(text: string): string[] {
  const normal = text
    .normalize('NFKC')
    // Invisible characters stand between words as often as inside them: a space keeps both apart.
    .replace(/[\u200b-\u200f\u2060\ufeff]/g, ' ')
    .replace(/\u00ad/g, '');
  const plain = normal.replace(/[^\S\n]+/g, ' ');
  // Spaced-out letters joined into words; a wider gap is the gap between two words.
  const joined = normal.replace(/\b(?:\p{L} ){2,}\p{L}\b/gu, (run) => run.replace(/ /g, '')).replace(/[^\S\n]+/g, ' ');
  const latin = plain.replace(/[\u0400-\u04ff]/g, (c) => HOMOGLYPHS[c] ?? c);
  const decoded = [...plain.matchAll(/[A-Za-z0-9+/]{24,}={0,2}/g)]
    .map(([run]) => Buffer.from(run, 'base64').toString('utf8'))
    .filter((text) => /^[\x20-\x7e\s]+$/.test(text));
  const unLeet = plain.replace(/[0134578@$]/g, (c) => ({ '0': 'o', '1': 'i', '3': 'e', '4': 'a', '5': 's', '7': 't', '8': 'b', '@': 'a', $: 's' })[c]!);
  return [...new Set([plain, joined, unLeet, latin, ...decoded])];
}

export interface InstructionCheck {
  instructionLike: boolean;
  /** The patterns that matched, in a fixed order; empty when none did. */
  signals: InstructionSignal[];
}

export function checkInstructionLike(text: string): InstructionCheck {
  const texts = views(text);
  const signals = new Set<InstructionSignal>();
  for (const [signal, pattern] of patterns) {
    if (!signals.has(signal) && texts.some((view) => pattern.test(view))) signals.add(signal);
  }
  return { instructionLike: signals.size > 0, signals: [...signals] };
}
