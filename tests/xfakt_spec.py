"""X-FaKT's literals as the spec (xfakt.md 4.1) gives them, verbatim, for the data and protocol
tests: the three question templates per language (bijection order) and the gold country names as
released (the Turkey-as-the-bird and Σιάμ mistranslations included: the corrected configs fix them).
"""

# spec 4.1, verbatim
TEMPLATES = {
    "en": (
        "In which country is {} located?",
        "{} is from which country?",
        "In which country is {} widely celebrated?",
    ),
    "hi": ("{} किस देश में स्थित है?", "{} किस देश से है?", "किस देश में {} व्यापक रूप से मनाया जाता है?"),
    "zh": ("{} 位于哪个国家？", "{} 来自哪个国家？", "在哪个国家广泛庆祝{}？"),
    "ru": (
        "В какой стране находится {}?",
        "{} из какой страны?",
        "В какой стране {} широко отмечается?",
    ),
    "ar": ("في أي بلد يقع {}؟", "{} من أي بلد؟", "في أي بلد يتم الاحتفال بـ {} على نطاق واسع؟"),
    "fr": (
        "Dans quel pays se trouve {} ?",
        "{} est de quel pays ?",
        "Dans quel pays {} est-il largement célébré ?",
    ),
    "ne": ("{} कुन देशमा अवस्थित छ?", "{} कुन देशबाट हो?", "कुन देशमा {} व्यापक रूपमा मनाइन्छ?"),
    "ja": (
        "{} はどの国にありますか?",
        "{} はどの国からですか?",
        "{} が広く祝われている国はどこですか?",
    ),
    "uk": (
        "У якій країні знаходиться {}?",
        "{} з якої країни?",
        "У якій країні широко відзначається {}?",
    ),
    "el": (
        "Σε ποια χώρα βρίσκεται το {};",
        "Το {} είναι από ποια χώρα;",
        "Σε ποια χώρα γιορτάζεται ευρέως το {};",
    ),
    "tr": (
        "{} hangi ülkede yer almaktadır?",
        "{} hangi ülkedendir?",
        "{} hangi ülkede yaygın olarak kutlanıyor?",
    ),
    "sw": (
        "{} iko katika nchi gani?",
        "{} anatoka nchi gani?",
        "Ni katika nchi gani {} inaadhimishwa sana?",
    ),
    "th": (
        "{} ตั้งอยู่ในประเทศใด?",
        "{} มาจากประเทศใด?",
        "ในประเทศใดที่ {} ได้รับการเฉลิมฉลองอย่างกว้างขวาง?",
    ),
}
# spec 4.1 gold names, as released (errors included)
GOLD = """
en United States | India | China | Russia | Saudi Arabia | France | Nepal | Japan | Ukraine | Greece | Turkey | Kenya | Thailand
hi संयुक्त राज्य अमेरिका | भारत | चीन | रूस | सऊदी अरब | फ्रांस | नेपाल | जापान | यूक्रेन | ग्रीस | टर्की | केन्या | थाईलैंड
zh 美国 | 印度 | 中国 | 俄罗斯 | 沙特阿拉伯 | 法国 | 尼泊尔 | 日本 | 乌克兰 | 希腊 | 火鸡 | 肯尼亚 | 泰国
ru Соединенные Штаты | Индия | Китай | Россия | Саудовская Аравия | Франция | Непал | Япония | Украина | Греция | Турция | Кения | Таиланд
ar الولايات المتحدة | الهند | الصين | روسيا | المملكة العربية السعودية | فرنسا | نيبال | اليابان | أوكرانيا | اليونان | ديك رومى | كينيا | تايلاند
fr États-Unis | Inde | Chine | Russie | Arabie Saoudite | France | Népal | Japon | Ukraine | Grèce | Turquie | Kenya | Thaïlande
ne संयुक्त राज्य अमेरिका | भारत | चीन | रूस | साउदी अरेबिया | फ्रान्स | नेपाल | जापान | युक्रेन | ग्रीस | टर्की | केन्या | थाइल्याण्ड
ja アメリカ合衆国 | インド | 中国 | ロシア | サウジアラビア | フランス | ネパール | 日本 | ウクライナ | ギリシャ | 七面鳥 | ケニア | タイ
uk США | Індія | Китай | Росія | Саудівська Аравія | Франція | Непал | Японія | Україна | Греція | Туреччина | Кенія | Таїланд
el Ηνωμένες Πολιτείες | Ινδία | Κίνα | Ρωσία | Σαουδική Αραβία | Γαλλία | Νεπάλ | Ιαπωνία | Ουκρανία | Ελλάδα | Τουρκία | Κενύα | Σιάμ
tr Amerika Birleşik Devletleri | Hindistan | Çin | Rusya | Suudi Arabistan | Fransa | Nepal | Japonya | Ukrayna | Yunanistan | Türkiye | Kenya | Tayland
sw Marekani | India | China | Urusi | Saudi Arabia | Ufaransa | Nepal | Japani | Ukraine | Ugiriki | Uturuki | Kenya | Thailand
th ประเทศสหรัฐอเมริกา | อินเดีย | จีน | รัสเซีย | ซาอุดิอาระเบีย | ฝรั่งเศส | เนปาล | ประเทศญี่ปุ่น | ยูเครน | กรีซ | ไก่งวง | เคนย่า | ประเทศไทย
"""  # noqa: E501
GOLD_TABLE = {line[:2]: line[3:].split(" | ") for line in GOLD.strip().splitlines()}
