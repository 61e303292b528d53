package enricher

import "strings"

// The words of europeanTime's languages. A phrase's words are written as
// wordSpans splits them: "aujourd'hui" is "aujourd hui", "avant-hier"
// "avant hier"; a word's alternatives are joined by |. Counts are {n},
// then {unit}, {weekday}, {month}, {year} (1970 to at's year) and {day}
// (1 to 31) slots.

var (
	euDay0, euDay1, euDay2             = unitSpan(unitDay, 0), unitSpan(unitDay, 1), unitSpan(unitDay, 2)
	euWeek0, euWeek1, euWeek2          = unitSpan(unitWeek, 0), unitSpan(unitWeek, 1), unitSpan(unitWeek, 2)
	euMonth0, euMonth1, euMonth2       = unitSpan(unitMonth, 0), unitSpan(unitMonth, 1), unitSpan(unitMonth, 2)
	euYear0, euYear1, euYear2          = unitSpan(unitYear, 0), unitSpan(unitYear, 1), unitSpan(unitYear, 2)
	euMorning0, euAfternoon0, euNight0 = partSpan(0, partMorning), partSpan(0, partAfternoon), partSpan(0, partEvening)
	euMorning1, euAfternoon1           = partSpan(1, partMorning), partSpan(1, partAfternoon)
	euEvening1, euLastNight            = partSpan(1, partEvening), partSpan(1, partNight)
	euMorning2, euEvening2, euNight2   = partSpan(2, partMorning), partSpan(2, partEvening), partSpan(2, partNight)
	euWeekend0, euWeekend1             = weekendSpan(0), weekendSpan(1)
)

// deNotAfter are the German possessives before "letzte Woche" that make
// it someone's final week ("meine letzte Woche im alten Job");
// deNotBefore the words after it that make it the last week of something
// ("die letzte Woche vor dem Urlaub", "der letzte Monat des Jahres").
var (
	deNotAfter = stringSet(strings.Fields(`mein meine meinen meinem meiner meines dein deine deinen deinem deiner
		sein seine seinen seinem seiner ihr ihre ihren ihrem ihrer unser unsere unseren unserem unserer
		euer eure euren eurem eurer`))
	deNotBefore = stringSet(strings.Fields(`vor des meines meiner deines deiner seines seiner ihres ihrer
		unseres unserer eures eurer`))
)

var euGerman = newEULang("de",
	"1 ein eine einem einer einen, 2 zwei, 3 drei, 4 vier, 5 fünf, 6 sechs, 7 sieben, 8 acht, 9 neun, 10 zehn, 11 elf, 12 zwölf, 15 fünfzehn, 20 zwanzig, 30 dreißig",
	"tag tage tagen, woche wochen, monat monate monaten, jahr jahre jahren, stunde stunden, minute minuten",
	"montag, dienstag, mittwoch, donnerstag, freitag, samstag sonnabend, sonntag",
	"januar jänner, februar, märz maerz, april, mai, juni, juli, august, september, oktober, november, dezember",
	"",
	`morgen übermorgen nächste nächsten nächster nächstes kommende kommenden kommender kommendes
		werde wirst wird werden werdet plane planen plant geplant vorhaben`,
	"heute gestern am guten",
	[]euCount{{[]string{"ein", "paar"}, 0}, {[]string{"paar"}, 0}, {[]string{"einigen"}, 0}, {[]string{"wenigen"}, 0}, {[]string{"mehreren"}, 0}},
	euPhrases{
		{phrases: "heute", span: euDay0},
		{phrases: "gestern", span: euDay1},
		{phrases: "vorgestern", span: euDay2},
		{phrases: "vorgestern morgen|früh|vormittag", span: euMorning2},
		{phrases: "vorgestern abend", span: euEvening2},
		{phrases: "heute morgen|früh|vormittag", span: euMorning0},
		{phrases: "heute nachmittag", span: euAfternoon0},
		{phrases: "heute abend", span: euNight0},
		{phrases: "gestern morgen|früh|vormittag", span: euMorning1},
		{phrases: "gestern nachmittag", span: euAfternoon1},
		{phrases: "gestern abend", span: euEvening1},
		{phrases: "gestern nacht", span: euLastNight},
		{phrases: "letzte nacht", span: euLastNight, final: true},
		{phrases: "diese|dieser woche", span: euWeek0},
		{phrases: "letzte|letzten|letzter|vorige|vorigen|voriger|vergangene|vergangenen|vergangener woche", span: euWeek1, final: true},
		{phrases: "vorletzte|vorletzten|vorletzter woche", span: euWeek2},
		{phrases: "diesen|diesem|dieser monat", span: euMonth0},
		{phrases: "letzten|letztem|vorigen|vorigem|vergangenen|vergangenem monat", span: euMonth1, final: true},
		{phrases: "vorletzten monat", span: euMonth2},
		{phrases: "dieses|diesem|diesen jahr", span: euYear0},
		{phrases: "letztes|letzten|letztem|voriges|vorigen|vorigem|vergangenes|vergangenen|vergangenem jahr", span: euYear1, final: true},
		{phrases: "vorletztes|vorletzten jahr", span: euYear2},
		{phrases: "letztes|letzten|letztem|voriges|vorigen|vergangenes|vergangenen|vergangenem wochenende", span: euWeekend1, final: true},
		{phrases: "dieses|diesem|diesen wochenende", span: euWeekend0, planned: true},
	},
	map[euKind]string{
		euAgo:         "vor {n} {unit}",
		euLastWeekday: "letzten|vergangenen|vorigen {weekday}",
		euMonth:       "im {month}, {month} {year}",
		euEarlyMonth:  "anfang {month}",
		euMidMonth:    "mitte {month}",
		euLateMonth:   "ende {month}",
		euDate:        "{day} {month}",
		euYear:        "im jahr|jahre {year}",
		euRolling:     "den|die letzten|vergangenen {n} {unit}, den|die letzten|vergangenen {units}",
	}).withPast("gesagt gesprochen besprochen geredet erzählt erwähnt geschrieben gefragt diskutiert unterhalten passiert gemacht gewesen war waren warst hatte hatten hattest sagte sagtest meinte", "jeden jedem jeder", "dass daß ob").withRolling("tage tagen wochen monate monaten jahre jahren stunden", "vor des der meines meiner deines deiner seines seiner ihres ihrer unseres unserer eures eurer bei im in").withCompounds(
	map[string][2]int{"morgen": partMorning, "früh": partMorning, "vormittag": partMorning, "mittag": partAfternoon,
		"nachmittag": partAfternoon, "abend": partEvening, "nacht": partNight}).withRest(
	`was wer wen wem wessen wo wohin woher wann warum wieso weshalb wie welche welcher welches welchen
		worüber wovon woran worum wofür womit ich du er sie es wir ihr mir mich dir dich uns euch ihm ihn ihnen
		mein meine meinen meinem meiner dein deine unser unsere unserem unseren unserer habe hab hast hat haben habt hatte hattest
		hatten bin bist ist sind seid war warst waren wurde wurden kann kannst können könntest hätte hätten
		würde würdest denn noch mal nochmal eigentlich genau bitte doch so also und oder aber der die das den
		dem des ein eine einen einem einer über von zu mit bei an auf in im am um für da dann zum zur beim vom
		ins ans aufs`,
	`gesagt sagen sag sagte sagtest gesprochen sprechen besprochen geredet reden erzählt erzählen erwähnt
		erwähnen geschrieben gefragt fragen diskutiert unterhalten passiert los gemacht erinnern erinnerst
		erinnere erinner weißt zusammenfassung zusammenfassen fasse zusammen thema themen alles sonst meinte
		gemeint gab gibt neues gespräch gespräche unterhaltung`,
	`danke dank vielen herzlichen hallo hi hey tschüss servus moin`,
	`guten gute schönen schöne tag abend nacht morgen bis`,
	`was wer wo wann warum welche welcher welches worüber wovon woran worum ich mir mich mein meine wir uns
		unser erinnern erinnerst zusammenfassung`)

var euFrench = newEULang("fr",
	"1 un une, 2 deux, 3 trois, 4 quatre, 5 cinq, 6 six, 7 sept, 8 huit, 9 neuf, 10 dix, 11 onze, 12 douze, 15 quinze, 20 vingt, 30 trente",
	"jour jours, semaine semaines, mois, an ans année années, heure heures, minute minutes",
	"lundi, mardi, mercredi, jeudi, vendredi, samedi, dimanche",
	"janvier, février fevrier, mars, avril, mai, juin, juillet, août aout, septembre, octobre, novembre, décembre decembre",
	"",
	`demain prochain prochaine prochains prochaines vais vas va allons allez vont compte comptes comptons
		prévu prévue prévois prévoit serai sera serons seront ferai fera ferons irai ira irons`,
	"ça ca",
	[]euCount{{[]string{"quelques"}, 0}, {[]string{"plusieurs"}, 0}},
	euPhrases{
		{phrases: "aujourd hui", span: euDay0},
		{phrases: "hier", span: euDay1, french: true},
		{phrases: "avant hier", span: euDay2},
		{phrases: "avant hier matin", span: euMorning2},
		{phrases: "avant hier soir", span: euNight2},
		{phrases: "ce matin", span: euMorning0},
		{phrases: "cet après midi", span: euAfternoon0},
		{phrases: "ce soir", span: euNight0},
		{phrases: "hier matin", span: euMorning1},
		{phrases: "hier après midi", span: euAfternoon1},
		{phrases: "hier soir, la nuit dernière|passée, nuit dernière|passée", span: euLastNight},
		{phrases: "cette semaine", span: euWeek0},
		{phrases: "la semaine dernière|passée, semaine dernière|passée", span: euWeek1},
		{phrases: "ce mois ci, ce mois", span: euMonth0},
		{phrases: "le mois dernier|passé, mois dernier|passé", span: euMonth1},
		{phrases: "cette année", span: euYear0},
		{phrases: "l année|an dernière|dernier|passée|passé, année dernière|passée, an dernier|passé", span: euYear1},
		{phrases: "le week end dernier|passé, week end dernier|passé, le weekend dernier|passé, weekend dernier|passé", span: euWeekend1},
		{phrases: "ce week end, ce weekend", span: euWeekend0, planned: true},
	},
	map[euKind]string{
		euAgo:         "il y a {n} {unit}",
		euLastWeekday: "{weekday} dernier",
		euMonth:       "en {month}, au mois de {month}, {month} {year}",
		euEarlyMonth:  "début {month}, début de|d {month}, début du mois de|d {month}",
		euMidMonth:    "mi {month}",
		euLateMonth:   "fin {month}, fin de|d {month}, fin du mois de|d {month}",
		euDate:        "{day} {month}",
		euYear:        "en {year}",
		euRolling:     "ces|les|des {n} derniers|dernières {unit}, ces|les|des derniers|dernières {units}",
	}).withPast("dit parlé discuté raconté mentionné écrit demandé fait passé été était étais étions avait avais avions", "chaque", "que qu").withRolling("jours semaines mois ans années heures", "de d du des avant").withRest(
	`que qu quoi qui quel quelle quels quelles où quand comment pourquoi est ce c ça je j tu il elle on
		nous vous ils elles me m moi te toi se s lui leur mon ma mes ton ta tes notre nos votre vos ai as a
		avons avez ont avais avait avions aviez été suis es sommes êtes sont était étais le la les l un une
		des du de d au aux en y à et ou mais donc alors sur avec pour dans par pas ne n plus encore déjà bien
		dont propos quelque chose peux peut pouvez pourrais`,
	`dit dire dis parlé parler discuté discuter raconté raconter mentionné mentionner écrit demandé passé
		rappelle rappelles rappeler souviens souvenir résumé résume résumer sujet sujets abordé évoqué fait
		faire parlait parlions parlais voulais`,
	`merci bonjour bonsoir salut coucou beaucoup revoir`,
	`bonne bon journée soirée nuit au`,
	`que qu quoi qui quel quelle où quand pourquoi je j moi me m mon ma mes nous nos notre rappelle souviens résumé`)

var euSpanish = newEULang("es",
	"1 un una uno, 2 dos, 3 tres, 4 cuatro, 5 cinco, 6 seis, 7 siete, 8 ocho, 9 nueve, 10 diez, 11 once, 12 doce, 15 quince, 20 veinte, 30 treinta",
	"día días dia dias, semana semanas, mes meses, año años, hora horas, minuto minutos",
	"lunes, martes, miércoles miercoles, jueves, viernes, sábado sabado, domingo",
	"enero, febrero, marzo, abril, mayo, junio, julio, agosto, septiembre setiembre, octubre, noviembre, diciembre",
	"de del",
	`mañana próximo próxima próximos próximas voy vas va vamos vais van planeo planeas planeamos pienso
		piensas pensamos seré será seremos serán haré hará haremos iré irá iremos`,
	"esta la por de en a",
	[]euCount{{[]string{"un", "par", "de"}, 2}, {[]string{"unos", "cuantos"}, 0}, {[]string{"unas", "cuantas"}, 0},
		{[]string{"unos"}, 0}, {[]string{"unas"}, 0}, {[]string{"algunos"}, 0}, {[]string{"algunas"}, 0},
		{[]string{"pocos"}, 0}, {[]string{"pocas"}, 0}, {[]string{"varios"}, 0}, {[]string{"varias"}, 0}},
	euPhrases{
		{phrases: "hoy", span: euDay0},
		{phrases: "ayer", span: euDay1},
		{phrases: "anteayer, antier, antes de ayer", span: euDay2},
		{phrases: "esta mañana, hoy por|en la mañana", span: euMorning0},
		{phrases: "esta tarde, hoy por|en la tarde", span: euAfternoon0},
		{phrases: "esta noche", span: euNight0},
		{phrases: "ayer por|en la mañana", span: euMorning1},
		{phrases: "ayer por|en la tarde", span: euAfternoon1},
		{phrases: "anoche, ayer por|en la noche", span: euLastNight},
		{phrases: "esta semana", span: euWeek0},
		{phrases: "la semana pasada, semana pasada, la pasada semana", span: euWeek1},
		{phrases: "la semana antepasada, semana antepasada", span: euWeek2},
		{phrases: "este mes", span: euMonth0},
		{phrases: "el mes pasado, mes pasado, el pasado mes", span: euMonth1},
		{phrases: "el mes antepasado, mes antepasado", span: euMonth2},
		{phrases: "este año", span: euYear0},
		{phrases: "el año pasado, año pasado, el pasado año", span: euYear1},
		{phrases: "el año antepasado, año antepasado", span: euYear2},
		{phrases: "el fin de semana pasado, fin de semana pasado, el finde pasado, finde pasado", span: euWeekend1},
		{phrases: "este fin de semana, este finde", span: euWeekend0, planned: true},
	},
	map[euKind]string{
		euAgo:         "hace {n} {unit}",
		euLastWeekday: "el {weekday} pasado, {weekday} pasado, el pasado {weekday}",
		euMonth:       "en {month}, {month} de|del {year}",
		euEarlyMonth:  "principios|comienzos|inicios de {month}, principios|comienzos|inicios del mes de {month}",
		euMidMonth:    "mediados de {month}, mediados del mes de {month}",
		euLateMonth:   "finales|fines|fin|final de {month}, finales|fines|fin|final del mes de {month}",
		euDate:        "{day} de {month}, día|dia {day} de {month}",
		euYear:        "en {year}, el año {year}, en el año {year}",
		euRolling:     "los|las|estos|estas últimos|últimas {n} {unit}, los|las|estos|estas últimos|últimas {units}",
	}).withPast("dije dijiste dijo dijimos hablé hablaste habló hablamos comenté comentaste comentamos conté contaste contamos mencioné mencionaste hice hiciste hizo hicimos pasó fue fui fuimos estuve estuvimos dicho hablado hecho", "los cada todos todas", "que").withRolling("días dias semanas meses años horas", "de del antes").withRest(
	`qué que quién quien quiénes cuál cual cuáles dónde donde cuándo cuando cómo como por yo tú tu él
		ella nosotros nosotras vosotros ellos ellas usted me te se nos os le les lo la los las mi mis tus su sus
		nuestro nuestra he has ha hemos habéis han había habías era fue fui fuimos estuve estuvimos un una unos
		unas el de del al a en y o pero sobre con para sin ya también algo puedes puede podrías`,
	`dije dijiste dijo dijimos decir dicho hablé hablaste habló hablamos hablar hablado comenté comentamos
		comentar comentado conté contaste contamos contar contado mencioné mencionaste mencionamos mencionar
		mencionado pregunté preguntaste discutimos conversamos charlamos pasó recuerdas recuerdo recordar
		acuerdas acuerdo resumen resume resumir tema temas hice hiciste hizo hicimos hacer hecho recuérdame
		recuerda conversación conversaciones charla`,
	`gracias muchas hola adiós adios saludos oye`,
	`buenos buenas días dias tardes noches hasta luego`,
	`qué que quién quien cuál dónde cuándo yo me mi mis nosotros nos nuestro recuerdas recuerdo acuerdas resumen`)

var euItalian = newEULang("it",
	"1 un una uno, 2 due, 3 tre, 4 quattro, 5 cinque, 6 sei, 7 sette, 8 otto, 9 nove, 10 dieci, 11 undici, 12 dodici, 15 quindici, 20 venti, 30 trenta",
	"giorno giorni, settimana settimane, mese mesi, anno anni, ora ore, minuto minuti",
	"lunedì lunedi, martedì martedi, mercoledì mercoledi, giovedì giovedi, venerdì venerdi, sabato, domenica",
	"gennaio, febbraio, marzo, aprile, maggio, giugno, luglio, agosto, settembre, ottobre, novembre, dicembre",
	"del",
	`domani dopodomani prossimo prossima prossimi prossime farò farà faremo sarò sarà saremo andrò andrà
		andremo programma programmato`,
	"",
	[]euCount{{[]string{"un", "paio", "di"}, 2}, {[]string{"qualche"}, 0}, {[]string{"alcuni"}, 0}, {[]string{"alcune"}, 0},
		{[]string{"pochi"}, 0}, {[]string{"poche"}, 0}, {[]string{"diversi"}, 0}, {[]string{"diverse"}, 0}},
	euPhrases{
		{phrases: "oggi", span: euDay0},
		{phrases: "ieri", span: euDay1},
		{phrases: "l altro ieri, altro ieri, altroieri, ieri l altro", span: euDay2},
		{phrases: "stamattina, stamani, stamane, questa mattina", span: euMorning0},
		{phrases: "oggi pomeriggio, questo pomeriggio", span: euAfternoon0},
		{phrases: "stasera, questa sera", span: euNight0},
		{phrases: "ieri mattina", span: euMorning1},
		{phrases: "ieri pomeriggio", span: euAfternoon1},
		{phrases: "ieri sera", span: euEvening1},
		{phrases: "ieri notte", span: euLastNight},
		{phrases: "questa settimana", span: euWeek0},
		{phrases: "la settimana scorsa|passata, settimana scorsa|passata, la scorsa settimana, scorsa settimana", span: euWeek1},
		{phrases: "questo mese", span: euMonth0},
		{phrases: "il mese scorso|passato, mese scorso|passato, lo scorso mese, scorso mese", span: euMonth1},
		{phrases: "quest anno", span: euYear0},
		{phrases: "l anno scorso|passato, anno scorso|passato, lo scorso anno, scorso anno", span: euYear1},
		{phrases: "il weekend scorso, weekend scorso, lo scorso weekend, il fine settimana scorso, fine settimana scorso, lo scorso fine settimana", span: euWeekend1},
		{phrases: "questo weekend, questo fine settimana", span: euWeekend0, planned: true},
	},
	map[euKind]string{
		euAgo:         "{n} {unit} fa",
		euLastWeekday: "{weekday} scorso|scorsa, lo scorso {weekday}, la scorsa {weekday}",
		euMonth:       "a|ad|in {month}, nel mese di {month}, {month} {year}",
		euEarlyMonth:  "inizio {month}, inizio|inizi di {month}, primi di {month}, inizio|inizi del mese di {month}",
		euMidMonth:    "metà|meta {month}, metà|meta di {month}, metà|meta del mese di {month}",
		euLateMonth:   "fine {month}, fine di {month}, fine del mese di {month}",
		euDate:        "{day} {month}",
		euYear:        "nel {year}",
		euRolling:     "gli|le|negli|nelle|questi|queste ultimi|ultime {n} {unit}, gli|le|negli|nelle|questi|queste ultimi|ultime {units}",
	}).withPast("detto parlato discusso raccontato menzionato chiesto fatto successo accaduto stato stata era ero eravamo", "il di ogni", "che").withRolling("giorni settimane mesi anni ore", "di del della dello dei degli delle prima").withRest(
	`cosa che chi quale quali dove quando come perché perche io tu lui lei noi voi loro mi ti ci vi si me te
		il lo la i gli le un una uno l di del della dei delle a al alla da in nel nella su sul con per e o ma ho
		hai ha abbiamo avete hanno avevo aveva era ero sono sei è siamo siete stato stata già ancora anche
		qualcosa mio mia miei mie tuo tua sulle sullo sugli dal dalla dallo dai dagli ai agli allo alle negli
		nello nelle cos puoi può potresti sulla sui dell dello degli nell nei dall sull nostro nostra nostri nostre`,
	`detto dire dico parlato parlare parlavamo discusso discutere raccontato raccontare menzionato accennato
		chiesto successo accaduto ricordi ricordo ricordare riassunto riassumi riassumere ricordami argomento
		argomenti fatto fare conversazione conversazioni chiacchierata`,
	`grazie mille ciao buongiorno buonasera buonanotte arrivederci salve`,
	`buona buon giornata serata sera pomeriggio`,
	`cosa che chi quale dove quando io mi me noi ci nostro ricordi ricordo riassunto`)

var euPortuguese = newEULang("pt",
	"1 um uma, 2 dois duas, 3 três tres, 4 quatro, 5 cinco, 6 seis, 7 sete, 8 oito, 9 nove, 10 dez, 11 onze, 12 doze, 15 quinze, 20 vinte, 30 trinta",
	"dia dias, semana semanas, mês mes meses, ano anos, hora horas, minuto minutos",
	"segunda, terça terca, quarta, quinta, sexta, sábado sabado, domingo",
	"janeiro, fevereiro, março marco, abril, maio, junho, julho, agosto, setembro, outubro, novembro, dezembro",
	"de",
	`amanhã próximo próxima próximos próximas vou vai vamos vão pretendo pretende pretendemos planejo
		planejamos serei será seremos farei fará faremos irei irá iremos`,
	"",
	[]euCount{{[]string{"um", "par", "de"}, 2}, {[]string{"uns"}, 0}, {[]string{"umas"}, 0}, {[]string{"alguns"}, 0},
		{[]string{"algumas"}, 0}, {[]string{"poucos"}, 0}, {[]string{"poucas"}, 0}, {[]string{"vários"}, 0},
		{[]string{"várias"}, 0}},
	euPhrases{
		{phrases: "hoje", span: euDay0},
		{phrases: "ontem", span: euDay1},
		{phrases: "anteontem, antes de ontem", span: euDay2},
		{phrases: "hoje de manhã, esta manhã, nesta manhã", span: euMorning0},
		{phrases: "hoje à tarde, esta tarde, nesta tarde", span: euAfternoon0},
		{phrases: "hoje à noite, esta noite", span: euNight0},
		{phrases: "ontem de manhã", span: euMorning1},
		{phrases: "ontem à tarde", span: euAfternoon1},
		{phrases: "ontem à noite, ontem de noite", span: euLastNight},
		{phrases: "esta|essa semana, nesta|nessa semana", span: euWeek0},
		{phrases: "a semana passada, semana passada", span: euWeek1},
		{phrases: "a semana retrasada, semana retrasada", span: euWeek2},
		{phrases: "este|esse mês, neste|nesse mês", span: euMonth0},
		{phrases: "o mês passado, mês passado", span: euMonth1},
		{phrases: "o mês retrasado, mês retrasado", span: euMonth2},
		{phrases: "este|esse ano, neste|nesse ano", span: euYear0},
		{phrases: "o ano passado, ano passado", span: euYear1},
		{phrases: "ano retrasado", span: euYear2},
		{phrases: "o fim de semana passado, fim de semana passado, o final de semana passado, final de semana passado", span: euWeekend1},
		{phrases: "este|esse fim de semana, neste|nesse fim de semana, este|esse final de semana", span: euWeekend0, planned: true},
	},
	map[euKind]string{
		euAgo:         "há|ha|faz {n} {unit}, {n} {unit} atrás|atras",
		euLastWeekday: "{weekday} passada|passado",
		euMonth:       "em {month}, no mês de {month}, {month} de {year}",
		euEarlyMonth:  "início|inicio|começo|comeco de {month}, início|inicio|começo|comeco do mês|mes de {month}",
		euMidMonth:    "meados de {month}, meados do mês|mes de {month}",
		euLateMonth:   "fim|fins|final|finais de {month}, fim|fins|final|finais do mês|mes de {month}",
		euDate:        "{day} de {month}, dia {day} de {month}",
		euYear:        "em {year}, no ano de {year}",
		euRolling:     "os|as|nos|nas|estes|estas|esses|essas|nestes|nestas|nesses|nessas últimos|últimas {n} {unit}, os|as|nos|nas|estes|estas|esses|essas|nestes|nestas|nesses|nessas últimos|últimas {units}",
	}).withPast("disse disseste dissemos falei falou falamos conversamos contei contou contamos mencionei comentei fiz fez fizemos aconteceu foi fui fomos estive estivemos era rolou", "toda todas cada", "que").withRolling("dias semanas meses anos horas", "de do da dos das antes").withRest(
	`que quê o a os as um uma uns umas de do da dos das em no na nos nas ao à por pelo pela com para e ou
		mas eu tu você vocês ele ela nós eles elas me te se lhe meu minha meus minhas nosso nossa seu sua foi
		fui fomos era eram tenho tinha temos tem tive tivemos estava estive é são qual quais quem onde quando
		como porque já também algo sobre gente pode podes pelos pelas num numa`,
	`disse dissemos dizer dito falei falou falamos falar falado conversamos conversar conversei contei
		contou contamos contar mencionei mencionou mencionamos mencionar comentei comentamos perguntei
		discutimos aconteceu lembra lembro lembrar resumo resumir assunto assuntos conversou fiz fez fizemos
		fazer feito rolou conversa conversas`,
	`obrigado obrigada valeu olá ola oi tchau`,
	`bom boa dia tarde noite até logo`,
	`que quê qual quem onde quando eu me meu minha nós nos nosso lembra lembro resumo`)

var euDutch = newEULang("nl",
	"1 een één, 2 twee, 3 drie, 4 vier, 5 vijf, 6 zes, 7 zeven, 8 acht, 9 negen, 10 tien, 11 elf, 12 twaalf, 15 vijftien, 20 twintig, 30 dertig",
	"dag dagen, week weken, maand maanden, jaar jaren, uur uren, minuut minuten",
	"maandag, dinsdag, woensdag, donderdag, vrijdag, zaterdag, zondag",
	"januari, februari, maart, april, mei, juni, juli, augustus, september, oktober, november, december",
	"",
	"morgen overmorgen volgende komende ga gaat gaan zal zult zullen plan plannen gepland",
	"",
	[]euCount{{[]string{"een", "paar"}, 0}, {[]string{"paar"}, 0}, {[]string{"enkele"}, 0}, {[]string{"een", "aantal"}, 0}},
	euPhrases{
		{phrases: "vandaag", span: euDay0},
		{phrases: "gisteren", span: euDay1},
		{phrases: "eergisteren", span: euDay2},
		{phrases: "vanochtend, vanmorgen", span: euMorning0},
		{phrases: "vanmiddag", span: euAfternoon0},
		{phrases: "vanavond", span: euNight0},
		{phrases: "gisterochtend, gistermorgen, gisteren ochtend", span: euMorning1},
		{phrases: "gistermiddag, gisteren middag", span: euAfternoon1},
		{phrases: "gisteravond, gisteren avond", span: euEvening1},
		{phrases: "gisternacht", span: euLastNight},
		{phrases: "deze week", span: euWeek0},
		{phrases: "vorige|afgelopen|verleden week", span: euWeek1},
		{phrases: "deze maand", span: euMonth0},
		{phrases: "vorige|afgelopen|verleden maand", span: euMonth1},
		{phrases: "dit jaar", span: euYear0},
		{phrases: "vorig|vorige|afgelopen|verleden jaar", span: euYear1},
		{phrases: "vorig|vorige|afgelopen weekend", span: euWeekend1},
		{phrases: "dit weekend", span: euWeekend0, planned: true},
	},
	map[euKind]string{
		euAgo:         "{n} {unit} geleden",
		euLastWeekday: "vorige|afgelopen {weekday}",
		euMonth:       "in {month}, {month} {year}",
		euEarlyMonth:  "begin {month}, begin van {month}",
		euMidMonth:    "half|medio|midden|halverwege {month}",
		euLateMonth:   "eind|einde {month}, eind|einde van {month}",
		euDate:        "{day} {month}",
		euYear:        "in {year}",
		euRolling:     "de afgelopen|laatste|voorbije {n} {unit}, de afgelopen|laatste|voorbije {units}, de afgelopen|voorbije {unit}",
	}).withPast("gezegd zei zeiden gesproken besproken gepraat verteld vertelde genoemd gevraagd gedaan deed deden gebeurd gebeurde was waren", "elke iedere ieder", "dat of omdat").withRolling("dagen weken maanden jaren uren", "van voor").withCompounds(
	map[string][2]int{"ochtend": partMorning, "morgen": partMorning, "middag": partAfternoon, "avond": partEvening,
		"nacht": partNight}).withRest(
	`wat wie waar wanneer waarom hoe welke waarover ik jij je u hij zij ze wij we jullie mij me mijn jouw
		ons onze heb hebt heeft hebben had hadden ben bent is zijn was waren werd kan kun kunt konden zou de
		het een van in op aan met voor over en of maar nog al eens dan er iets bij dat die dit deze toen`,
	`gezegd zeggen zei zeiden gesproken spraken praten gepraat besproken bespraken verteld vertellen
		vertelde genoemd noemde geschreven gevraagd vroeg gebeurd herinner herinneren weet samenvatting
		samenvatten onderwerp onderwerpen gehad gebeurde deed deden gedaan praatten praatte gesprek gesprekken`,
	`dank bedankt dankjewel dankuwel hallo hoi goedemorgen goedemiddag goedenavond goedendag doei`,
	`fijne fijn goede dag morgen middag avond tot ziens`,
	`wat wie waar wanneer waarover ik mij me mijn wij we ons onze herinner weet samenvatting`)

var euRussian = newEULang("ru",
	"1 один одна одну одного, 2 два две, 3 три, 4 четыре, 5 пять, 6 шесть, 7 семь, 8 восемь, 9 девять, 10 десять, 11 одиннадцать, 12 двенадцать, 15 пятнадцать, 20 двадцать, 30 тридцать",
	"день дня дней дни сутки суток, неделю недели недель неделя, месяц месяца месяцев месяцы, год года лет годы, час часа часов часы, минуту минуты минут",
	"понедельник, вторник, среду среда, четверг, пятницу пятница, субботу суббота, воскресенье",
	`январь января январе, февраль февраля феврале, март марта марте, апрель апреля апреле, май мая мае,
		июнь июня июне, июль июля июле, август августа августе, сентябрь сентября сентябре, октябрь октября октябре,
		ноябрь ноября ноябре, декабрь декабря декабре`,
	"",
	`завтра послезавтра следующей следующем следующий следующую буду будет будем будут будешь собираюсь
		собираемся собираешься планирую планируем планирую поеду поедем пойду пойдём пойдем полечу полетим уеду
		уедем`,
	"",
	[]euCount{{[]string{"несколько"}, 0}, {[]string{"пару"}, 2}},
	euPhrases{
		{phrases: "сегодня", span: euDay0},
		{phrases: "вчера", span: euDay1},
		{phrases: "позавчера", span: euDay2},
		{phrases: "позавчера утром", span: euMorning2},
		{phrases: "позавчера вечером", span: euEvening2},
		{phrases: "сегодня утром", span: euMorning0},
		{phrases: "сегодня днём|днем", span: euAfternoon0},
		{phrases: "сегодня вечером", span: euNight0},
		{phrases: "вчера утром", span: euMorning1},
		{phrases: "вчера днём|днем", span: euAfternoon1},
		{phrases: "вчера вечером", span: euEvening1},
		{phrases: "вчера ночью, прошлой ночью", span: euLastNight},
		{phrases: "на этой неделе", span: euWeek0},
		{phrases: "на прошлой|прошедшей неделе, прошлая неделя, прошлую неделю", span: euWeek1},
		{phrases: "на позапрошлой неделе", span: euWeek2},
		{phrases: "в этом месяце", span: euMonth0},
		{phrases: "в прошлом месяце, прошлый месяц", span: euMonth1},
		{phrases: "в позапрошлом месяце", span: euMonth2},
		{phrases: "в этом году", span: euYear0},
		{phrases: "в прошлом году, прошлый год", span: euYear1},
		{phrases: "в позапрошлом году", span: euYear2},
		{phrases: "в прошлые выходные, на прошлых выходных, прошлые выходные", span: euWeekend1},
		{phrases: "в эти выходные, на этих выходных", span: euWeekend0, planned: true},
	},
	map[euKind]string{
		euAgo:         "{n} {unit} назад, {unit} назад",
		euLastWeekday: "в|во прошлый|прошлую|прошлое {weekday}",
		euMonth:       "в {month}, {month} {year}",
		euEarlyMonth:  "начале {month}, первых числах {month}",
		euMidMonth:    "середине {month}, половине {month}",
		euLateMonth:   "конце {month}",
		euDate:        "{day} {month}",
		euYear:        "в {year}",
		euRolling:     "последние {n} {unit}, последние {units}, за последнюю|последний {unit}",
	}).withPast(`сказал сказала сказали говорил говорила говорили обсуждали обсуждал обсуждала рассказывал
		рассказывала рассказал рассказала упоминал упоминала упомянул упомянула писал писала спрашивал
		спрашивала делал делала делали был была были было`, "каждый каждую каждое", "что чтобы ли").
	withRolling("дни дней недели недель месяцы месяцев годы лет часы часов", `перед до января февраля марта апреля
		мая июня июля августа сентября октября ноября декабря года месяца недели отпуска`).withRest(
	`что чём чего о об про я ты он она мы вы они мне меня тебе тебя нам нас мой моя моё мои наш наша наши
		в во на с со у к по за и а но или же ли ещё уже это этот эта эти тот та то как когда где какой какая
		какие какое года году можешь можете течение`,
	`сказал сказала сказали говорил говорила говорили говорить обсуждали обсуждать рассказывал
		рассказывала рассказал рассказала упоминал упоминала разговор разговоре разговаривали напомни
		напомнить помнишь было произошло случилось делал делала был была были писал писала писали нового
		новенького`,
	`спасибо привет здравствуй здравствуйте пока благодарю`,
	`доброе добрый утро день вечер`,
	`что чём какой какая какие когда где я мне меня мы нам нас напомни помнишь`)

var euPolish = newEULang("pl",
	"1 jeden jedna jedno, 2 dwa dwie dwóch, 3 trzy trzech, 4 cztery czterech, 5 pięć pięciu, 6 sześć, 7 siedem, 8 osiem, 9 dziewięć, 10 dziesięć, 11 jedenaście, 12 dwanaście, 15 piętnaście, 20 dwadzieścia, 30 trzydzieści",
	"dzień dni dnia dniach, tydzień tygodnie tygodni tygodnia tygodniu tygodniach, miesiąc miesiące miesięcy miesiąca miesiącu miesiącach, rok lata lat roku latach, godzinę godziny godzin godzina godzinach, minutę minuty minut minuta",
	"poniedziałek, wtorek, środę środa, czwartek, piątek, sobotę sobota, niedzielę niedziela",
	`styczeń stycznia styczniu, luty lutego lutym, marzec marca marcu, kwiecień kwietnia kwietniu, maj maja maju,
		czerwiec czerwca czerwcu, lipiec lipca lipcu, sierpień sierpnia sierpniu, wrzesień września wrześniu,
		październik października październiku, listopad listopada listopadzie, grudzień grudnia grudniu`,
	"",
	`jutro pojutrze przyszłym przyszłej przyszły przyszłą następnym następnej następny będę będzie będziemy
		będą będziesz planuję planujemy zamierzam zamierzamy pojadę pojedziemy pójdę pójdziemy polecę polecimy
		jadę jedziemy wyjeżdżam`,
	"",
	[]euCount{{[]string{"kilka"}, 0}, {[]string{"parę"}, 0}, {[]string{"kilku"}, 0}},
	euPhrases{
		{phrases: "dzisiaj, dziś", span: euDay0},
		{phrases: "wczoraj", span: euDay1},
		{phrases: "przedwczoraj", span: euDay2},
		{phrases: "przedwczoraj rano", span: euMorning2},
		{phrases: "przedwczoraj wieczorem", span: euEvening2},
		{phrases: "dziś|dzisiaj rano", span: euMorning0},
		{phrases: "dziś|dzisiaj po południu", span: euAfternoon0},
		{phrases: "dziś|dzisiaj wieczorem", span: euNight0},
		{phrases: "wczoraj rano", span: euMorning1},
		{phrases: "wczoraj po południu", span: euAfternoon1},
		{phrases: "wczoraj wieczorem", span: euEvening1},
		{phrases: "wczoraj w nocy, zeszłej nocy", span: euLastNight},
		{phrases: "w tym tygodniu", span: euWeek0},
		{phrases: "w zeszłym|ubiegłym|poprzednim|przeszłym tygodniu, zeszły|ubiegły tydzień", span: euWeek1},
		{phrases: "w tym miesiącu", span: euMonth0},
		{phrases: "w zeszłym|ubiegłym|poprzednim miesiącu, zeszły|ubiegły miesiąc", span: euMonth1},
		{phrases: "w tym roku", span: euYear0},
		{phrases: "w zeszłym|ubiegłym|poprzednim roku, zeszły|ubiegły rok", span: euYear1},
		{phrases: "w zeszły|ubiegły|ostatni weekend", span: euWeekend1},
		{phrases: "w ten weekend", span: euWeekend0, planned: true},
	},
	map[euKind]string{
		euAgo:         "{n} {unit} temu, {unit} temu",
		euLastWeekday: "w|we zeszły|zeszłą|ubiegły|ubiegłą|ostatni|ostatnią {weekday}",
		euMonth:       "w {month}, {month} {year}",
		euEarlyMonth:  "początku|początkiem {month}",
		euMidMonth:    "połowie {month}",
		euLateMonth:   "koniec|końcu|końcem {month}",
		euDate:        "{day} {month}",
		euYear:        "w {year}, w roku {year}",
		euRolling:     "ostatnie|ostatnich {n} {unit}, ostatnie|ostatnich {units}, w ostatnim {unit}, przez ostatni {unit}, w ciągu ostatniego {unit}",
	}).withPast(`powiedziałem powiedziałam powiedziałeś powiedziałaś powiedział powiedziała mówiłem mówiłam mówiłeś
		mówiliśmy mówiłyśmy rozmawialiśmy rozmawiałem rozmawiałam rozmawiałyśmy opowiadałem opowiadałam
		wspominałem wspominałam wspomniałem wspomniałam pisałem pisałam byłem byłam był była było byliśmy
		robiłem robiłam zrobiłem zrobiłam`, "każdy każdą każde co", "że czy żeby").
	withRolling("dni dniach tygodnie tygodni tygodniach miesiące miesięcy miesiącach lata lat latach godziny godzin godzinach", `przed stycznia lutego marca
		kwietnia maja czerwca lipca sierpnia września października listopada grudnia roku miesiąca tygodnia
		wakacji urlopu studiów`).withRest(
	`co czym czego o ja ty on ona my wy oni mi mnie ci cię nam nas mój moja moje moi nasz nasza nasze w we
		na z ze u do po pod przez i a ale lub albo czy już jeszcze to ten ta te jak kiedy gdzie jaki jaka jakie
		roku się za dla ciągu możesz możecie byłem byłam byłeś byłaś byliśmy`,
	`powiedziałem powiedziałam powiedziałeś powiedział powiedziała mówiłem mówiłam mówiliśmy rozmawialiśmy
		rozmawiałem rozmawiałam rozmowa rozmowie opowiadałem wspominałem wspomniałem przypomnij przypomnieć
		pamiętasz działo stało robiłem robiłam zrobiłem było był była mówiłeś mówiłaś mówił mówiła
		powiedziałaś pisałem pisałam pisałeś gadaliśmy gadałem gadałam nowego`,
	`dzięki dziękuję cześć hej witaj`,
	`dzień dobry dobranoc dobrego dnia`,
	`co czym jaki jaka jakie kiedy gdzie ja mnie mi my nas nam przypomnij pamiętasz`)
