/**
 * The patterns of the instruction-like check (instruction-like.ts), each for one way an
 * instruction shows itself, and the signal it reports. They run on linearRegex (RE2): a pattern
 * cannot backtrack, so none can hold the event loop however it is written.
 */
import { linearRegex, type LinearRegex } from './linear-regex.ts';

/** Why a text was held: one label per pattern that matched, for the reviewer and the logs. */
export type PatternSignal =
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

/**
 * A word other than "be", where the patterns once said `(?!be\b)\w+` (RE2 has no lookahead):
 * "the assistant should recommend …" is an instruction, "the assistant should be …" mostly a
 * description. The word starts with a letter other than b, or is "b" alone, or starts with b
 * and goes on with anything but e, or starts with "be" and goes on.
 */
export const NOT_BE = String.raw`(?:[0-9ac-zAC-Z_]|[bB](?:[^eE]|$)|[bB][eE]\w)`;
/**
 * What follows "Assistant:" when it is not a name, where the patterns once said
 * `(?!\s*[A-Z][a-z]+ [A-Z][a-z]+)` with the `i` flag ("Assistant: Jana Novak" is a job title):
 * after the spaces, no two words of two or more ASCII letters with one space between. So: no
 * letter, or one letter alone, or a run of letters not followed by a space, or a run and a
 * space and then no letter or one letter alone. test/unit/instruction-like-patterns.test.ts
 * checks both rewrites against the lookaheads they replace on generated texts.
 */
export const NOT_A_NAME = String.raw`\s*(?:[^\sA-Za-z]|$|[A-Za-z](?:[^A-Za-z]|$)|[A-Za-z]{2,}(?:[^A-Za-z ]|$)|[A-Za-z]{2,} (?:[^A-Za-z]|$|[A-Za-z](?:[^A-Za-z]|$)))`;

/**
 * An address, where the patterns once said `\S+@\S+\.\w+` and backtracked for seconds over a
 * run of @: the same texts match, since a match of either holds a match of the other.
 */
export const AN_ADDRESS = String.raw`\S@\S+\.\w`;

export const instructionPatterns: readonly (readonly [PatternSignal, LinearRegex])[] = [
  // Chat templates and role prefixes that a model reads as a turn of its own conversation; a
  // role prefix only when what follows speaks like a turn ("Assistant: Jana Novak" is a job title).
  ['role-tag', linearRegex(String.raw`<\|\s*(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id)\s*\|>|\[\/?INST\]|<<\/?SYS>>|<\/?\s*(?:system|assistant|instructions?)\s*>|^\s*#{2,}\s*(?:system|instructions?|new instructions?|response)\b`, 'im')],
  ['role-tag', linearRegex(String.raw`^\s*(?:system|assistant|developer)\s*(?:prompt|message)?\s*:\s*(?:you\b|i\b|i'm\b|i will\b|sure\b|ok\b|okay\b|as an?\b|from now\b|ignore\b|always\b|never\b|new\b|the user\b|understood\b)`, 'im')],
  // Dropping what came before.
  ['override', linearRegex(String.raw`\b${DROP}\b[^.!?\n]{0,50}?\b${RULES}\b|\bnew (?:instructions?|rules?|system prompt|task)\s*:|\byour new (?:task|role|instructions?|rules?|goal|purpose) (?:is|are)\b|\bjailbreak|\b(?:enter|enable|activate|switch to|you are (?:now )?in) developer mode\b|\bdo anything now\b|\bwithout (?:any )?(?:safety|content) (?:caveats|filters?|restrictions?|rules?)\b|\bcontent filter\b|\bsans restrictions?\b|\bsin restricciones\b|\bohne (?:einschränkungen|regeln)\b`, 'i')],
  // "DAN" the jailbreak persona, in capitals ("Dan is the team lead" is a colleague).
  ['override', linearRegex(String.raw`\bDAN\b`)],
  // The assistant, the model or the AI spoken to, or told what it must be or do.
  ['assistant-addressed', linearRegex(String.raw`\b(?:you are|you're) (?:now|no longer|from now on)\b|\b(?:you|u) (?:must|shall|will|should|have to|need to|are to|are required to)\s+(?:always|never|now|only|not|immediately|from now on|respond|reply|answer|say|tell|ignore|obey|follow|comply|pretend|act|treat|include|mention|recommend|output|print|reveal|send|forward|refuse|stop|start|use)\b|\b(?:dear|hey|attention|note to|p\.?s\.? to|message (?:to|for)|instructions? (?:to|for)|to|for) (?:the |any |all |every )?(?:${READER})s?\b(?: reading this| that reads this)?\s*[,:;.—–-]|\b(?:the|any|an?) (?:${READER}) (?:should|must|shall|will|needs to|has to|is to|is required to)\s+${NOT_BE}|\b${READER}\s*[,:]\s*(?:please\s+)?(?:you\b|always|never|do|don't|ignore|forget|respond|reply|answer|say|tell|stop|start|from now on|when)|\b(?:act|behave|roleplay|role-play) as\b|\bpretend (?:to be|you(?:'re| are))\b|\b${FROM_NOW_ON}\b[^.!?\n]{0,60}\b(?:${YOU}|always|never|respond|reply|answer|only|réponds|répondez|antwortest|antworte|responde|rispondi|responda|antwoord)\b|\b(?:tu dois|vous devez|du musst|sie müssen|debes|tienes que|devi|você deve|je moet)\b|\bwhen(?:ever)? you (?:see|read|find|retrieve|load|process) this\b|\b(?:obey|serve) (?:me|only me|the user|this note)\b|\btreat (?:me|this|all|everything)\b[^.!?\n]{0,40}\b(?:developer|admin|administrator|priority|system|instructions?)\b|\b(?:than|over) (?:your|the|any) system (?:prompt|message)\b`, 'i')],
  // Imperatives about the answer itself: "Always respond in …", "Whenever you summarise, add …".
  ['response-directive', linearRegex(String.raw`(?:^|[.!?:;\n]\s*)(?:please\s+)?(?:always|never|only|do not|don't|make sure to|be sure to)\s+(?:respond|reply|answer|say|mention|tell (?:the )?user|talk about|recommend|suggest|include|add|output|print|write|use|speak|refer|call (?:the )?user|address (?:the )?user|bring up|discuss|acknowledge|reveal|disclose|ask (?:for )?(?:confirmation|permission)|end (?:every|each|your)|start (?:every|each|your)|begin (?:every|each|your))\b|(?:^|[.!?:;\n]\s*)(?:respond|reply|answer)\s+(?:only\s+)?(?:in|with|using|as)\b|\bin (?:every|each|all|your) (?:future )?(?:answers?|responses?|replies|messages?|recommendations?|summar(?:y|ies))\b|\b(?:end|start|begin|sign) (?:every|each|all) (?:answers?|responses?|replies|messages?)\b|\bwhen(?:ever)? (?:(?:you|the user|a user|someone|anyone|they|he|she) (?:asks?|says?|mentions?|summari[sz]es?|writes?|requests?|talks?|reads?)|asked)\b[^.!?\n]{0,80}[,;:]\s*(?:then\s+)?(?:tell|say|answer|reply|respond|add|omit|include|recommend|refuse|ignore|send|call|ask|claim|insist|do not|don't|never|always)\b|\bwhen(?:ever)? (?:you|asked)\b[^.!?\n]{0,60}\b(?:add|omit|append|insert) (?:the|a|this)\b|\bjust (?:run|execute|do) (?:it|the command|them)\b|\b(?:review queue|mark (?:it|this)(?: memory)? as (?:approved|verified|trusted))\b`, 'im')],
  // Hiding things from the user, or revealing what the model was told.
  ['secrecy', linearRegex(String.raw`\b(?:do not|don't|never|skip|avoid)\s+(?:tell(?:ing)?|inform(?:ing)?|let(?:ting)?|show(?:ing)?|reveal(?:ing)?|disclos(?:e|ing)|mention(?:ing)? (?:this|it|that) to)\s+(?:the )?(?:user|customer|human|them|anyone)\b|\bwithout (?:telling|informing|letting) (?:the )?(?:user|customer|human)\b|\b(?:secretly|covertly|quietly|silently)\s+(?:skip|append|add|cc|bcc|send|forward|include|insert|change|tell|remove|omit)\b|\b(?:reveal|print|show|output|repeat|leak|dump|display)\b[^.!?\n]{0,40}\b(?:system prompt|hidden prompt|(?:your|initial|original|hidden) (?:instructions|prompt|rules|guidelines|configuration)|text above|everything above)\b|\bomit\b[^.!?\n]{0,60}\b(?:and|then) (?:say|tell|claim)\b|\bverschweig|\bne (?:dis|dites) (?:jamais|pas) à l'utilisateur\b`, 'i')],
  // Sending data somewhere: memory, conversation, keys, to a URL, an address or a tool.
  ['exfiltration', linearRegex(String.raw`\b(?:send|post|forward|upload|transmit|exfiltrate|copy|email|e-mail|leak|cc|bcc|append)\b[^.!?\n]{0,60}\b(?:conversation|chat history|chat log|memory|memories|context|transcript|api keys?|credentials?|passwords?|session tokens?|tokens?|secrets?|user data|personal data|all data|everything|contents of|email address|\.ssh|id_rsa)\b[^!?\n]{0,80}?(?:https?:\/\/|\bto\s+\S+@\S+|\bwebhook\b|\btool\b|\bevery (?:reply|answer|email|message)\b)|!\[[^\]]*\]\(https?:\/\/[^)]*[?&][^)]*=(?:\{|[A-Z_]{4,})|\b(?:call|use) the \w+ tool with\b`, 'i')],
  // Spoken to in any of those languages: "Asistente: …", "À l'assistant : …", "Nota para el bot: …".
  ['assistant-addressed', linearRegex(String.raw`(?:^|[.!?。\n]\s*|\b(?:to|for|à|a|al|an|para|pour|für|per|dla|для|إلى|note to|p\.?s\.? to)\s+(?:the |any |all |l'|el |la |le |den |die |der )?)${READER_ANY}(?:へ|に)?\s*[:：,，]${NOT_A_NAME}|${READER_ANY}\s*(?:へ|に)(?:[:：,，]|注意)|${READER_ANY}请注意|\b(?:to|for) (?:the |any |all |every )?(?:${READER})s? (?:reading|processing|summari[sz]ing|handling|reviewing|that reads|who reads)\b|\b(?:kindly|appreciate it if|required that|would you)\b[^.!?\n]{0,40}\b(?:the )?(?:${READER})\b|\b(?:the )?(?:${READER}) (?:is|are) (?:now )?(?:authori[sz]ed|allowed|permitted|instructed|required)\b|\byou are (?:\S+ ){1,2}now\b|\byour (?:real|true|actual|new|only|secret) (?:task|goal|job|purpose|mission|instructions?|orders?)\b|\b(?:this is|i am|i'm) (?:the|your) (?:developer|creator|administrator|admin|operator)\b|\btrust (?:the )?(?:instructions?|commands?|notes?) (?:found |stored )?in\b`, 'i')],
  ['role-tag', linearRegex(String.raw`\[(?:system|admin|developer|sys)\]|^\s*(?:system|admin|developer) (?:note|notice|message|override|update|instruction)s?\s*:|"role"\s*:\s*"system"`, 'im')],
  // Operating the agent rather than describing the world: "Tell the user …", "Delete every memory …".
  ['response-directive', linearRegex(String.raw`(?:^|[.!?:;\n]\s*)(?:tell|inform|remind) (?:the |every )?(?:user|customer|caller|client)s?\b|\b(?:delete|erase|wipe|purge|remove) (?:every|all|each|any) (?:memory|memories|note|notes|file|files|record|records)\b|\b(?:grant|give) \S+ (?:admin|owner|root|full) (?:rights|access|permissions?|privileges)\b|\brespond to (?:the )?next message\b|\bthe next time you (?:run|respond|answer|see|read|are asked)\b|\bwithout (?:asking|requesting|waiting for) (?:anyone|for confirmation|confirmation|permission|the user)\b|\bif (?:the user|a user|someone|anyone|they) (?:ever )?(?:mentions?|says?|asks?|writes?|types?)\b[^.!?\n]{0,80}[,;:]\s*(?:then\s+)?\w+|\bdecode (?:this|the following|it)\b[^.!?\n]{0,40}\b(?:do|follow|execute|run|obey)\b`, 'im')],
  ['secrecy', linearRegex(String.raw`${DO_NOT_TELL}|\b(?:refrain from|avoid) (?:mentioning|telling|revealing|disclosing)\b|\bkept? (?:\S+ ){0,4}to (?:itself|yourself|themselves)\b`, 'i')],
  // Harvesting what the user types; a send verb of another language with a URL or an address
  // later on its line (within 120 characters before: an automaton counting 120 characters after
  // every such word took 0.2–0.6 s over a text dense with them; the labelled sets hold the same).
  ['exfiltration', linearRegex(String.raw`\b(?:log|record|capture|collect|harvest)\b[^.!?\n]{0,20}\b(?:everything|all)\b[^.!?\n]{0,20}\b(?:they|the user|he|she|users?) (?:types?|says?|writes?|enters?)\b|\bcollect (?:the )?(?:user'?s'?|their|his|her) (?:api keys?|passwords?|credentials?|tokens?|card)\b|\b(?:envoie|envoyez|sende|senden sie|envía|envia|invia|wyślij|отправ\S*|أرسل|把|上传|送信)\b[^\n]*(?:https?:\/\/|${AN_ADDRESS})|\b(?:email|send|forward|upload)\b[^.!?\n]{0,40}\b(?:contents? of|addresses|home address(?:es)?)\b[^.!?\n]{0,60}\b(?:address|endpoint|url|server|reply|@)`, 'i')],
];
