package contentfilter

// firstNames are common English-language given names that are rarely
// anything else (May, Will, Grace, Mark, Bill and the like are left out:
// capitalized at a sentence's start they are ordinary words).
var firstNames = setOf(
	"James", "John", "Robert", "Michael", "William", "David", "Richard", "Joseph", "Thomas", "Charles",
	"Christopher", "Daniel", "Matthew", "Anthony", "Donald", "Steven", "Paul", "Andrew", "Joshua", "Kenneth",
	"Kevin", "Brian", "George", "Timothy", "Ronald", "Edward", "Jason", "Jeffrey", "Ryan", "Jacob",
	"Gary", "Nicholas", "Eric", "Jonathan", "Stephen", "Larry", "Justin", "Scott", "Brandon", "Benjamin",
	"Samuel", "Gregory", "Alexander", "Patrick", "Raymond", "Dennis", "Jerry", "Tyler", "Aaron", "Jose",
	"Adam", "Nathan", "Henry", "Douglas", "Zachary", "Peter", "Kyle", "Ethan", "Walter", "Noah",
	"Jeremy", "Christian", "Keith", "Roger", "Terry", "Austin", "Sean", "Gerald", "Carl", "Harold",
	"Dylan", "Arthur", "Lawrence", "Jordan", "Jesse", "Bryan", "Billy", "Bruce", "Gabriel", "Joe",
	"Logan", "Albert", "Willie", "Alan", "Juan", "Wayne", "Elijah", "Randy", "Roy", "Vincent",
	"Ralph", "Eugene", "Russell", "Bobby", "Mason", "Philip", "Louis", "Liam", "Lucas", "Oliver",
	"Mary", "Patricia", "Jennifer", "Linda", "Elizabeth", "Barbara", "Susan", "Jessica", "Sarah", "Karen",
	"Lisa", "Nancy", "Betty", "Margaret", "Sandra", "Ashley", "Kimberly", "Emily", "Donna", "Michelle",
	"Carol", "Amanda", "Dorothy", "Melissa", "Deborah", "Stephanie", "Rebecca", "Sharon", "Laura", "Cynthia",
	"Kathleen", "Amy", "Angela", "Shirley", "Anna", "Brenda", "Pamela", "Emma", "Nicole", "Helen",
	"Samantha", "Katherine", "Christine", "Debra", "Rachel", "Carolyn", "Janet", "Catherine", "Maria", "Heather",
	"Diane", "Julie", "Joyce", "Victoria", "Kelly", "Christina", "Lauren", "Joan", "Evelyn", "Olivia",
	"Judith", "Megan", "Cheryl", "Martha", "Andrea", "Hannah", "Jacqueline", "Gloria", "Teresa", "Kathryn",
	"Sara", "Janice", "Julia", "Marie", "Madison", "Abigail", "Sophia", "Judy", "Theresa", "Beverly",
	"Denise", "Marilyn", "Amber", "Danielle", "Brittany", "Diana", "Natalie", "Isabella", "Charlotte", "Alice",
	"Ava", "Mia", "Amelia", "Harper", "Chloe", "Zoe", "Priya", "Raj", "Wei", "Ahmed",
	"Mohammed", "Muhammad", "Fatima", "Aisha", "Omar", "Ali", "Hiroshi", "Yuki", "Carlos", "Luis",
	"Miguel", "Sofia", "Lucia", "Pierre", "Hans", "Ingrid", "Sven", "Olga", "Ivan", "Dmitri",
	"Anil", "Sanjay", "Deepak", "Ananya", "Kenji", "Akira", "Elena",
)

// stopWords are capitalized words that end a name match: a sentence's
// next word after a name is often one of them.
var stopWords = setOf(
	"I", "The", "And", "But", "Or", "If", "So", "Then", "When", "We", "You", "He", "She", "It", "They",
	"This", "That", "These", "Those", "A", "An", "In", "On", "At", "To", "For", "From", "With", "By",
	"Inc", "Ltd", "LLC", "Corp", "Street", "Avenue", "Road", "University", "Hospital", "Company",
	"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
	"January", "February", "March", "April", "June", "July", "August", "September", "October", "November", "December",
)

func setOf(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}
